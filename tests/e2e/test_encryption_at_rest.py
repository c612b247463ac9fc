"""Encryption at rest through the real server: content never reaches Postgres in the clear,
users see no difference, a PURGE of a subject shreds its data key, and a damaged key makes
exactly that subject's content unavailable — never garbage — while everything else works."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from cryptography.exceptions import InvalidTag
from google.protobuf import struct_pb2
from psycopg.rows import dict_row

from memoryd.domain import DataKeyUnavailable
from memoryd.storage import DataKey, LocalKeyProvider, load_or_create_master_key
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc
from tests.support import draft, fails

WAIT = svc.CONSISTENCY_WAIT_INDEXED
ALL_STATUSES = [pb.MEMORY_STATUS_ACTIVE, pb.MEMORY_STATUS_FORGOTTEN]


def struct(**values: Any) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(values)
    return out


def owner_rows(dsn: str, query: str, *params: Any) -> list[dict[str, Any]]:
    """Read as the database owner (a superuser here: row level security does not apply)."""
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        return conn.execute(query, params).fetchall()


def owner_execute(dsn: str, query: str, *params: Any) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(query, params)


def master_key_of(server: Any) -> Path:
    return Path(server.env["MEMORYD_DATA_DIR"]) / "keys" / "master.key"


def places_holding(dsn: str, needles: list[str]) -> list[str]:
    """Every (table.column) of the database, in any text, bytea, json or array column, whose
    value contains one of ``needles`` — the way an attacker with a dump would look."""
    columns = owner_rows(
        dsn,
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = 'public' AND data_type IN ('text', 'bytea', 'jsonb', 'json', 'ARRAY', "
        "'character varying')",
    )
    found = []
    with psycopg.connect(dsn) as conn:
        for c in columns:
            column = psycopg.sql.Identifier(c["column_name"])
            value = (psycopg.sql.SQL("encode({}, 'escape')").format(column) if c["data_type"] == "bytea"
                     else psycopg.sql.SQL("{}::text").format(column))
            for needle in needles:
                query = psycopg.sql.SQL("SELECT count(*) FROM {t} WHERE {v} ILIKE %s").format(
                    t=psycopg.sql.Identifier(c["table_name"]), v=value)
                if conn.execute(query, (f"%{needle}%",)).fetchone()[0]:
                    found.append(f"{c['table_name']}.{c['column_name']}")
    return found


def test_no_memory_text_or_value_is_stored_in_the_clear(agent, server, postgres):
    secret = f"zanzibar{uuid.uuid4().hex[:8]}"
    value = f"quetzal{uuid.uuid4().hex[:8]}"
    first = agent.write("alice", draft("fact", f"Lives in {secret}", key="home_city", data=struct(code=value)),
                        idempotency_key=uuid.uuid4().hex, consistency=WAIT)
    agent.write("alice", draft("fact", f"Moved from {secret} to Porto", key="home_city"), consistency=WAIT)
    agent.write("alice", draft("event", f"Visited {secret} with {value}"), consistency=WAIT)
    agent.write("alice", draft("event", f"visited {secret} with {value}", importance=0.9), consistency=WAIT)  # merged
    agent.write("alice", draft("constraint", f"Never book {secret}", key="travel", scope=pb.SCOPE_ORG))
    agent.write("alice", draft("context", f"Asked about {secret}", key="topic", scope=pb.SCOPE_SESSION,
                               session_id="session-1"))
    agent.erase("alice", mode=svc.ERASE_MODE_FORGET, key="topic")
    assert agent.history("alice", first.results[0].memory_id).versions[-1].memory.text == f"Lives in {secret}"

    assert places_holding(postgres.owner_dsn, [secret, value]) == []
    # The vector index holds ids, filters and vectors only (Milvus Lite keeps it in files).
    milvus_files = [p for p in (Path(server.env["MEMORYD_DATA_DIR"]) / "milvus").rglob("*") if p.is_file()]
    assert milvus_files
    assert not [p for p in milvus_files if secret.encode() in p.read_bytes() or value.encode() in p.read_bytes()]


def test_users_see_no_difference_in_write_recall_view_and_history(agent):
    written = agent.write("alice", draft("preference", "Python", key="primary_language", data=struct(level="expert")))
    memory_id = written.results[0].memory_id
    agent.write("alice", draft("preference", "Rust", key="primary_language", data=struct(level="learning")))
    agent.write("alice", draft("constraint", "No meetings before 10", key="schedule", scope=pb.SCOPE_ORG))
    agent.write("alice", draft("event", "Gave a talk on 漢字 in Kyoto"), consistency=WAIT)

    [recalled] = agent.recall_keys("alice", "primary_language").memories
    assert (recalled.memory.text, dict(recalled.memory.data), recalled.memory.content_unavailable) == (
        "Rust", {"level": "learning"}, False)
    org = agent.recall_keys("alice", "schedule", filter=pb.MemoryFilter(include_org=True)).memories
    assert [m.memory.text for m in org] == ["No meetings before 10"]
    found = agent.call("Recall", svc.RecallRequest(subject="alice", query="talk in Kyoto", top_k=3)).memories
    assert "Gave a talk on 漢字 in Kyoto" in [m.memory.text for m in found]
    assert sorted(m.text for m in agent.list_all("alice")) == ["Gave a talk on 漢字 in Kyoto", "Rust"]
    versions = agent.history("alice", memory_id).versions
    assert [(v.memory.text, dict(v.memory.data)) for v in versions] == [
        ("Rust", {"level": "learning"}), ("Python", {"level": "expert"})]
    # A repeat is still recognised as one (the dedup digest is keyed, not gone).
    again = agent.write("alice", draft("preference", "Rust", key="primary_language", data=struct(level="learning")))
    assert again.results[0].outcome == svc.WRITE_OUTCOME_UNCHANGED


def test_purging_a_subject_shreds_its_key_so_copies_of_its_rows_cannot_be_read(agent, server, postgres, tenant):
    dsn = postgres.owner_dsn
    agent.write("alice", draft("fact", "Lives in Lisbon", key="home_city"), consistency=WAIT)
    agent.write("alice", draft("fact", "Lives in Porto", key="home_city"), consistency=WAIT)
    agent.write("alice", draft("event", "Flew to Madeira", data=struct(seat="12A")), consistency=WAIT)
    agent.write("bob", draft("fact", "Lives in Faro", key="home_city"), consistency=WAIT)
    # A "backup" of alice's rows, and — separately — of her wrapped key, taken before the purge.
    copies = owner_rows(dsn, "SELECT id AS memory_id, subject, text, text_ct, data_ct FROM memories "
                             "WHERE tenant_id = %s AND subject = 'alice' UNION ALL "
                             "SELECT memory_id, subject, text, text_ct, data_ct FROM memory_versions "
                             "WHERE tenant_id = %s AND subject = 'alice'", tenant, tenant)
    [saved_key] = owner_rows(dsn, "SELECT wrapped FROM subject_keys WHERE tenant_id = %s AND subject = 'alice'",
                             tenant)
    assert len(copies) == 5 and all(c["text"] is None and c["text_ct"] for c in copies)

    receipt = agent.erase("alice", all_of_subject=True).receipt

    assert (receipt.counts.keys, receipt.counts.memories, receipt.verified) == (1, 2, True)
    assert owner_rows(dsn, "SELECT 1 FROM subject_keys WHERE tenant_id = %s AND subject = 'alice'", tenant) == []
    # Nothing the server still has opens the copies: its master key and every key row left.
    provider = LocalKeyProvider(load_or_create_master_key(master_key_of(server)))
    left = owner_rows(dsn, "SELECT subject, wrapped FROM subject_keys WHERE tenant_id = %s", tenant)
    assert [r["subject"] for r in left] == ["bob"]
    candidates = [asyncio.run(provider.unwrap(tenant, r["subject"], bytes(r["wrapped"]))) for r in left]
    candidates.append(load_or_create_master_key(master_key_of(server)))
    for copy in copies:
        for candidate in candidates:
            with pytest.raises(InvalidTag):
                DataKey(tenant, "alice", candidate).open(str(copy["memory_id"]), "text", bytes(copy["text_ct"]))
        with pytest.raises(DataKeyUnavailable):  # nor does bob's key row pass for alice's
            asyncio.run(provider.unwrap(tenant, "alice", bytes(left[0]["wrapped"])))
    # What shredding does not cover: a copy that also kept the wrapped key row is still
    # readable with the master key (docs/security.md, "Encryption at rest"). Pinned here on purpose.
    kept = DataKey(tenant, "alice", asyncio.run(provider.unwrap(tenant, "alice", bytes(saved_key["wrapped"]))))
    readable = {kept.open(str(c["memory_id"]), "text", bytes(c["text_ct"])).decode() for c in copies}
    assert readable == {"Lives in Lisbon", "Lives in Porto", "Flew to Madeira"}

    # Bob is untouched; alice can start over, under a fresh key; purging again finds no key.
    assert [m.memory.text for m in agent.recall_keys("bob", "home_city").memories] == ["Lives in Faro"]
    agent.write("alice", draft("fact", "Lives in Braga", key="home_city"))
    [fresh] = owner_rows(dsn, "SELECT wrapped FROM subject_keys WHERE tenant_id = %s AND subject = 'alice'", tenant)
    assert bytes(fresh["wrapped"]) != bytes(saved_key["wrapped"])
    assert [m.memory.text for m in agent.recall_keys("alice", "home_city").memories] == ["Lives in Braga"]
    purged = agent.erase("alice", all_of_subject=True).receipt
    assert purged.counts.keys == 1
    assert agent.erase("alice", all_of_subject=True).receipt == purged  # a client's retry: the same receipt
    assert agent.erase("alice", all_of_subject=True, reason="once more").receipt.counts.keys == 0


def test_forget_and_narrower_purges_keep_the_key(agent, postgres, tenant):
    agent.write("alice", draft("fact", "Lives in Lisbon", key="home_city"))
    agent.write("alice", draft("event", "Flew to Madeira"))

    assert agent.erase("alice", mode=svc.ERASE_MODE_FORGET, all_of_subject=True).receipt.counts.keys == 0
    assert agent.erase("alice", key="home_city").receipt.counts.keys == 0

    assert len(owner_rows(postgres.owner_dsn, "SELECT 1 FROM subject_keys WHERE tenant_id = %s", tenant)) == 1
    forgotten = agent.list_all("alice", statuses=ALL_STATUSES)
    assert [(m.text, m.content_unavailable) for m in forgotten] == [("Flew to Madeira", False)]


def test_a_damaged_key_makes_only_that_subjects_content_unavailable(agent, postgres, tenant):
    dsn = postgres.owner_dsn
    memory_id = agent.write("alice", draft("fact", "Lives in Lisbon", key="home_city",
                                           data=struct(zip="1100")), consistency=WAIT).results[0].memory_id
    agent.write("alice", draft("fact", "Lives in Porto", key="home_city"), consistency=WAIT)
    agent.write("alice", draft("event", "Flew to Madeira"), consistency=WAIT)
    agent.write("bob", draft("fact", "Lives in Faro", key="home_city"), consistency=WAIT)
    agent.write("bob", draft("constraint", "No flights on Sundays", key="travel", scope=pb.SCOPE_ORG),
                consistency=WAIT)
    # Flip every bit of one byte: overwriting it with a constant left the key intact whenever
    # the byte already had that value (1 run in 256).
    owner_execute(dsn, "UPDATE subject_keys SET wrapped = set_byte(wrapped, 19, get_byte(wrapped, 19) # 255) "
                       "WHERE tenant_id = %s AND subject = 'alice'", tenant)

    recalled = agent.recall_keys("alice", "home_city", "travel", filter=pb.MemoryFilter(include_org=True),
                                render_block=True)
    # The key is sealed with the subject's data key too: a lost key hides it as well.
    by_key = {m.memory.key: m.memory for m in recalled.memories}
    assert set(by_key) == {"", "travel"}
    assert (by_key[""].content_unavailable, by_key[""].text, by_key[""].id) == (True, "", memory_id)
    assert not by_key[""].HasField("data")
    assert (by_key["travel"].content_unavailable, by_key["travel"].text) == (False, "No flights on Sundays")
    assert "No flights on Sundays" in recalled.block and "home_city" not in recalled.block
    searched = agent.call("Recall", svc.RecallRequest(subject="alice", query="Madeira", top_k=5)).memories
    assert searched and {(m.memory.text, m.memory.content_unavailable) for m in searched} == {("", True)}
    listed = agent.list_all("alice")
    assert len(listed) == 2 and all(m.content_unavailable and m.text == "" for m in listed)
    assert all(v.memory.content_unavailable for v in agent.history("alice", memory_id).versions)
    assert [m.memory.text for m in agent.recall_keys("bob", "home_city").memories] == ["Lives in Faro"]

    rows_before = owner_rows(dsn, "SELECT count(*) AS n FROM memories WHERE tenant_id = %s", tenant)
    failure = fails(agent.write, "alice", draft("fact", "Lives in Braga", key="home_city"))
    assert (failure.code, failure.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "DATA_KEY_UNAVAILABLE")
    assert owner_rows(dsn, "SELECT count(*) AS n FROM memories WHERE tenant_id = %s", tenant) == rows_before
    assert agent.write("bob", draft("fact", "Lives in Evora", key="home_city")).results[0].outcome == \
        svc.WRITE_OUTCOME_VERSIONED
