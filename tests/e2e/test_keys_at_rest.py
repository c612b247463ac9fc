"""Memory keys and tags are never stored readable: not in Postgres's tables, dead tuples or
WAL, not in the vector store's files, not in the logs — on any path (writes, replacements,
merges, pending values, reads through a glob view, erasure by key).

The server runs with a data dir and a database of its own; the scan reads every file of the
suite's PostgreSQL cluster (after a CHECKPOINT, so the pages are on disk too) and of this
server's data dir and log, for key and tag names unique to this test.
"""

from __future__ import annotations

import uuid

import grpc
import psycopg

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from ..support import agent_with_view, draft, full_view, unique
from .test_physical_erasure import _server, residue


def test_no_key_or_tag_name_reaches_any_file(tmp_path, private_database, key_file, postgres):
    tenant, mark = unique("tenant"), uuid.uuid4().hex[:10]
    subject = f"subject-{mark}"
    key = {name: f"key-{name}-{mark}" for name in ("city", "diet", "allergy", "erased")}
    tag = {name: f"tag-{name}-{mark}" for name in ("home", "food", "trip", "erased", "pending")}
    process = _server(tmp_path, private_database, key_file).start()
    try:
        with grpc.insecure_channel(process.target) as channel:
            agent = agent_with_view(channel, key_file, tenant)
            wait = {"consistency": svc.CONSISTENCY_WAIT_INDEXED}
            agent.write(subject, draft("fact", "Lives in Porto", key=key["city"], tags=[tag["home"]],
                                       source_kind=pb.SOURCE_KIND_SYNC), **wait)
            # A value of lower trust is held pending, with its own tags.
            held = agent.write(subject, draft("fact", "Lives in Faro", key=key["city"], tags=[tag["pending"]]))
            assert held.results[0].outcome == svc.WRITE_OUTCOME_PENDING
            agent.write(subject, draft("preference", "Vegan", key=key["diet"], tags=[tag["food"]]), **wait)
            agent.write(subject, draft("preference", "Vegetarian", key=key["diet"], tags=[tag["food"]]), **wait)
            agent.write(subject, draft("constraint", "No peanuts", key=key["allergy"]), **wait)
            # A repeat merges, uniting tags.
            agent.write(subject, draft("event", "Flew to Oslo", tags=[tag["trip"]]), **wait)
            agent.write(subject, draft("event", "Flew to Oslo", tags=[tag["trip"], tag["food"]]), **wait)
            agent.write(subject, draft("fact", "Owns a bike", key=key["erased"], tags=[tag["erased"]]), **wait)

            # Reads by key, by tag and through a view whose globs must match the key names.
            assert [m.memory.text for m in agent.recall_keys(subject, key["diet"]).memories] == ["Vegetarian"]
            globbing = agent_with_view(channel, key_file, tenant, agent="reader", view=full_view(
                "reader", read_rules=[pb.ViewRule(category=pb.CATEGORY_FACT, key_patterns=["key-c*"]),
                                      pb.ViewRule(category=pb.CATEGORY_PREFERENCE, key_patterns=["*-diet-*"])]))
            listed = {m.key: m.tags for m in globbing.list_all(subject)}
            assert listed == {key["city"]: [tag["home"]], key["diet"]: [tag["food"]]}
            recalled = globbing.call("Recall", svc.RecallRequest(subject=subject, query="where does the user live",
                                                                 top_k=5))
            assert {m.memory.key for m in recalled.memories} <= {key["city"], key["diet"]}
            assert [m.key for m in agent.list_all(subject, filter=pb.MemoryFilter(tags=[tag["trip"]]))] == [""]

            # Erasure by key: the selector is logged by its label only.
            receipt = agent.erase(subject, mode=svc.ERASE_MODE_FORGET, key=key["erased"]).receipt
            assert receipt.counts.memories == 1
            receipt = agent.erase(subject, mode=svc.ERASE_MODE_PURGE, key=key["erased"]).receipt
            assert receipt.verified and receipt.counts.memories == 1
    finally:
        assert process.stop() == 0
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")

    names = {f"key {n}": v.encode() for n, v in key.items()} | {f"tag {n}": v.encode() for n, v in tag.items()}
    assert residue(postgres.pgdata, names) == {}
    assert residue(tmp_path, names) == {}
    # The scan does find what is stored in the clear (the subject), in both places.
    assert residue(postgres.pgdata, {"subject": subject.encode()})
    assert residue(tmp_path / "data" / "milvus", {"subject": subject.encode()})
