"""The audit log: writes, reads and erases in one hash chain per tenant; tampering is detected."""

from __future__ import annotations

import json
import re
import subprocess
import time

import grpc
import psycopg

from memoryd.v1 import memory_service_pb2 as svc

from ..support import MEMORYD, ROOT, ServerProcess, agent_with_view, draft, server_env, unique


def _verify(env: dict[str, str], tenant: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MEMORYD, "audit", "verify", "--tenant", tenant], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def _events(dsn: str, tenant: str) -> list[tuple[int, str, str, list[str]]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT seq, action, agent, memory_ids FROM audit_log WHERE tenant_id = %s ORDER BY seq",
                            (tenant,)).fetchall()
    return [(seq, action, agent, [str(i) for i in ids]) for seq, action, agent, ids in rows]


def test_every_write_read_and_erase_is_chained_and_tampering_is_detected(tmp_path, private_database, key_file):
    env = server_env(MEMORYD_DATA_DIR=str(tmp_path), MEMORYD_POSTGRES_DSN=private_database,
                     MEMORYD_SIGNING_KEY_FILE=str(key_file))
    tenant = unique("tenant")
    process = ServerProcess(env, tmp_path / "server.log").start()
    try:
        with grpc.insecure_channel(process.target) as channel:
            agent = agent_with_view(channel, key_file, tenant, "support-bot")
            written = agent.write("alice", draft("fact", "Lives in Lyon", key="home_city"),
                                  draft("event", "Asked about a refund"))
            ids = [r.memory_id for r in written.results]
            agent.recall_keys("alice", "home_city")
            agent.list("alice")
            agent.history("alice", ids[0])
            agent.erase("alice", mode=svc.ERASE_MODE_FORGET, key="home_city")
    finally:
        assert process.stop() == 0  # a graceful stop flushes the batched read events

    events = _events(private_database, tenant)
    # Writes and erases are chained in their own transaction; reads are batched off the
    # request path, so they join the chain up to a second later, in the order they happened.
    actions = [action for _, action, _, _ in events]
    assert sorted(actions) == sorted(["view.put", "write", "read.recall", "read.view", "read.history",
                                      "erase.forget"])
    assert [a for a in actions if a.startswith("read.")] == ["read.recall", "read.view", "read.history"]
    assert actions.index("view.put") < actions.index("write") < actions.index("erase.forget")
    # The view was stored by the tenant admin; everything else was done by the agent.
    assert {(action, agent) for _, action, agent, _ in events if agent != "support-bot"} == {("view.put", "tenant-admin")}
    recall_event = next(e for e in events if e[1] == "read.recall")
    assert recall_event[3] == [ids[0]]  # the read event names exactly the memories returned
    # Each event names the view version the agent acted through and the call's trace.
    with psycopg.connect(private_database) as conn:
        tags = conn.execute("SELECT action, details->>'view', trace_id FROM audit_log WHERE tenant_id = %s "
                            "ORDER BY seq", (tenant,)).fetchall()
    assert [(action, view) for action, view, _ in tags if action != "view.put"] == [
        (action, "1") for action in actions if action != "view.put"]
    traces = [trace for _, _, trace in tags]
    assert all(re.fullmatch(r"[0-9a-f]{32}", t) for t in traces) and len(set(traces)) == len(traces)
    result = _verify(env, tenant)
    assert result.returncode == 0 and "intact: 6 events" in result.stdout, result.stdout + result.stderr

    # Someone with database access edits one event: the chain no longer holds from there.
    with psycopg.connect(private_database, autocommit=True) as conn:
        conn.execute("UPDATE audit_log SET agent = 'nobody' WHERE tenant_id = %s AND seq = %s", (tenant, events[2][0]))
    edited = _verify(env, tenant)
    assert edited.returncode == 1 and f"event {events[2][0]} " in edited.stdout

    # Undo the edit, then delete an event instead: the next link breaks.
    with psycopg.connect(private_database, autocommit=True) as conn:
        conn.execute("UPDATE audit_log SET agent = 'support-bot' WHERE tenant_id = %s AND seq = %s",
                     (tenant, events[2][0]))
        assert _verify(env, tenant).returncode == 0
        conn.execute("DELETE FROM audit_log WHERE tenant_id = %s AND seq = %s", (tenant, events[1][0]))
    deleted = _verify(env, tenant)
    assert deleted.returncode == 1 and f"event {events[2][0]} " in deleted.stdout


def test_each_tenant_has_its_own_chain(tmp_path, private_database, key_file):
    env = server_env(MEMORYD_DATA_DIR=str(tmp_path), MEMORYD_POSTGRES_DSN=private_database,
                     MEMORYD_SIGNING_KEY_FILE=str(key_file))
    a, b = unique("tenant"), unique("tenant")
    process = ServerProcess(env, tmp_path / "server.log").start()
    try:
        with grpc.insecure_channel(process.target) as channel:
            agents = {tenant: agent_with_view(channel, key_file, tenant) for tenant in (a, b)}
            for tenant in (a, b, a, b):
                agents[tenant].write("alice", draft("event", f"note {time.time()}"))
    finally:
        process.stop()
    for tenant in (a, b):
        result = _verify(env, tenant)
        assert result.returncode == 0 and "intact: 3 events" in result.stdout  # its view, two writes


def test_audit_erasures_lists_each_erasure_with_its_checks(tmp_path, private_database, key_file):
    env = server_env(MEMORYD_DATA_DIR=str(tmp_path), MEMORYD_POSTGRES_DSN=private_database,
                     MEMORYD_SIGNING_KEY_FILE=str(key_file))
    tenant = unique("tenant")
    process = ServerProcess(env, tmp_path / "server.log").start()
    try:
        with grpc.insecure_channel(process.target) as channel:
            agent = agent_with_view(channel, key_file, tenant, "support-bot")
            agent.write("alice", draft("fact", "Lives in Lyon", key="home_city"))
            receipt = agent.erase("alice", key="home_city").receipt
    finally:
        assert process.stop() == 0

    listed = subprocess.run([*MEMORYD, "audit", "erasures", "--tenant", tenant, "--json"], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    [line] = listed.stdout.splitlines()
    erasure = json.loads(line)
    assert (erasure["erase_id"], erasure["mode"], erasure["agent"]) == (receipt.erase_id, "purge", "support-bot")
    assert erasure["verified"] is receipt.verified is True and erasure["recheck"] is None and erasure["pending"] == []
    assert [(c["verified"], c["recheck"]) for c in erasure["checks"]] == [(True, False)]
    text = subprocess.run([*MEMORYD, "audit", "erasures", "--tenant", tenant], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert text.stdout.startswith(f"{receipt.erase_id} purge by support-bot at ") and ": verified\n" in text.stdout
