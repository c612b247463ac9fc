"""The access log: one line per call in a real server's log, as text by default and as JSON
with MEMORYD_LOG_FORMAT=json — naming the call, never a credential or content."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import memory_service_pb2_grpc as svc_grpc

from ..support import ServerProcess, agent_with_view, draft, fails, server_env, unique

TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"


def lines_until(log: Path, found: Callable[[list[str]], bool], timeout: float = 10.0) -> list[str]:
    """The log's lines once ``found`` holds for them (the server writes after answering)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = log.read_text().splitlines()
        if found(lines) or time.monotonic() > deadline:
            return lines
        time.sleep(0.1)


def test_every_call_gets_a_text_access_line_by_default(server: ServerProcess, channel: grpc.Channel,
                                                       key_file: Path):
    tenant, request_id = unique("tenant"), unique("req")
    agent = agent_with_view(channel, key_file, tenant)
    agent.memory.Write(svc.WriteRequest(subject="alice", items=[draft("fact", "Alice lives in Lisbon", key="home")]),
                       metadata=(*agent.metadata, ("x-request-id", request_id)), timeout=30)
    lines = lines_until(server.log_path, lambda ls: any(f"request_id={request_id} " in seen for seen in ls))
    [line] = [one for one in lines if f"request_id={request_id} " in one]
    assert " memoryd.access: " in line
    assert (f"request_id={request_id} method=memoryd.v1.MemoryService/Write code=OK duration_ms=" in line
            and f" tenant={tenant} agent=agent-1 trace_id=" in line), line
    assert "Lisbon" not in line and "alice" not in line and agent.token not in line


def test_json_access_lines_carry_the_request_id_status_caller_and_trace(tmp_path: Path, private_database: str,
                                                                        key_file: Path):
    env = server_env(MEMORYD_DATA_DIR=str(tmp_path), MEMORYD_POSTGRES_DSN=private_database,
                     MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_LOG_FORMAT="json")
    process = ServerProcess(env, tmp_path / "server.log").start()
    tenant = unique("tenant")
    try:
        with grpc.insecure_channel(process.target) as channel:
            agent = agent_with_view(channel, key_file, tenant)
            agent.memory.Write(svc.WriteRequest(subject="alice", items=[draft("fact", "Alice lives in Lisbon",
                                                                              key="home")]),
                               metadata=(*agent.metadata, ("x-request-id", "req-write-1"),
                                         ("traceparent", f"00-{TRACE}-{PARENT}-01")), timeout=30)
            refused = fails(agent.memory.Recall, svc.RecallRequest(subject=""),
                            metadata=(*agent.metadata, ("x-request-id", "req-bad-1")), timeout=30)
            assert refused.code == grpc.StatusCode.INVALID_ARGUMENT
            anonymous = fails(svc_grpc.MemoryServiceStub(channel).Recall, svc.RecallRequest(subject="alice"),
                              metadata=(("x-request-id", "req-anon-1"),), timeout=30)
            assert anonymous.code == grpc.StatusCode.UNAUTHENTICATED
        lines = lines_until(process.log_path, lambda ls: sum('"req-' in seen for seen in ls) >= 3)
    finally:
        process.stop()
    records = [json.loads(line) for line in lines if line.startswith("{")]
    # Every log record is a JSON object (a library printing to stderr by itself is not a record).
    assert records and not [one for one in lines if re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ ", one)]
    access: dict[str, dict[str, Any]] = {r["request_id"]: r for r in records if r["logger"] == "memoryd.access"}
    write = access["req-write-1"]
    assert {k: write[k] for k in ("level", "method", "code", "tenant", "agent", "trace_id")} == {
        "level": "INFO", "method": "memoryd.v1.MemoryService/Write", "code": "OK", "tenant": tenant,
        "agent": "agent-1", "trace_id": TRACE}
    assert isinstance(write["duration_ms"], float) and write["duration_ms"] > 0 and write["time"].endswith("+00:00")
    assert access["req-bad-1"]["code"] == "INVALID_ARGUMENT" and access["req-bad-1"]["tenant"] == tenant
    # Before authentication there is no caller to name.
    assert access["req-anon-1"]["code"] == "UNAUTHENTICATED" and access["req-anon-1"]["tenant"] == ""
    assert len(access["req-anon-1"]["trace_id"]) == 32 and access["req-anon-1"]["trace_id"] != TRACE
    text = "\n".join(lines)
    assert "Lisbon" not in text and agent.token not in text and '"alice"' not in text
    # The other lines (start-up, shutdown) are JSON too.
    assert any(r["logger"] == "memoryd.server" and "message" in r for r in records)
