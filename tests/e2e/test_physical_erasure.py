"""What a PURGE leaves on disk: nothing of the purged memories in the vector store's files, and
files nobody but memoryd's user can read.

Each test runs a server with a data dir and a database of its own, so every file under the
data dir is this test's; the scans read every file both as raw bytes and decoded (Parquet
segments and tombstones, Arrow write-ahead logs), since a column may be compressed.
"""

from __future__ import annotations

import asyncio
import os
import stat
import struct
from collections.abc import Iterator
from pathlib import Path

import grpc
import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memoryd.storage import MilvusIndex
from memoryd.v1 import memory_service_pb2 as svc

from ..support import Agent, ServerProcess, agent_with_view, draft, server_env, unique

SUBJECT, NEIGHBOUR = "subject-purged-q7f3", "subject-kept-k2m9"


def _server(tmp_path: Path, database: str, key_file: Path) -> ServerProcess:
    env = server_env(MEMORYD_DATA_DIR=str(tmp_path / "data"), MEMORYD_POSTGRES_DSN=database,
                     MEMORYD_SIGNING_KEY_FILE=str(key_file))
    return ServerProcess(env, tmp_path / "server.log")


def _scalars(value: object) -> Iterator[bytes]:
    if isinstance(value, str):
        yield value.encode()
    elif isinstance(value, list) and value and all(isinstance(v, float) for v in value):
        yield struct.pack(f"<{len(value)}f", *value)
    elif isinstance(value, list):
        for item in value:
            yield from _scalars(item)


def _decoded(path: Path) -> bytes:
    """Every string and vector a Parquet or Arrow file holds, as bytes."""
    try:
        if path.suffix == ".parquet":
            table = pq.read_table(path)
        elif path.suffix == ".arrow":
            with pa.memory_map(str(path)) as source:
                table = pa.ipc.open_stream(source).read_all()
        else:
            return b""
    except pa.ArrowException:
        return b""
    return b"\0".join(b for row in table.to_pylist() for value in row.values() for b in _scalars(value))


def residue(folder: Path, needles: dict[str, bytes]) -> dict[str, list[str]]:
    """Which needles (by label) each file under ``folder`` holds."""
    found: dict[str, list[str]] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            data = path.read_bytes() + b"\0" + _decoded(path)
            for label, needle in needles.items():
                if needle in data:
                    found.setdefault(label, []).append(str(path.relative_to(folder)))
    return found


def stored_vectors(database: str, uri: Path, tenant: str, ids: list[str]) -> dict[str, list[float]]:
    """The vectors as the index keeps them (read with the server stopped: Lite is one process's)."""
    from milvus_lite.server_manager import server_manager_instance

    with psycopg.connect(database) as conn:
        row = conn.execute("SELECT model_id, dim FROM index_models WHERE active").fetchone()
    assert row is not None

    async def read() -> dict[str, list[float]]:
        index = MilvusIndex(str(uri), model_id=row[0], dim=row[1])
        try:
            return await index.partition(tenant).vectors(ids)
        finally:
            await index.close()

    try:
        return asyncio.run(read())
    finally:
        server_manager_instance.release_server(str(uri))


def _write(agent: Agent, subject: str, *items) -> list[str]:
    return [agent.write(subject, item, consistency=svc.CONSISTENCY_WAIT_INDEXED).results[0].memory_id
            for item in items]


def test_purge_leaves_nothing_of_the_purged_memories_in_the_vector_store_files(tmp_path, private_database,
                                                                                key_file, postgres):
    tenant = unique("tenant")
    milvus_dir = tmp_path / "data" / "milvus"
    process = _server(tmp_path, private_database, key_file).start()
    try:
        with grpc.insecure_channel(process.target) as channel:
            agent = agent_with_view(channel, key_file, tenant)
            first, *rest = _write(
                agent, SUBJECT,
                draft("fact", "Lives in Porto", key="key-city-q7f3", tags=["tag-first-q7f3"]),
                draft("event", "Visited the cardiologist", tags=["tag-event-q7f3"]),
                draft("preference", "Vegan", key="key-diet-q7f3", tags=["tag-diet-q7f3"]))
            # A changed value is re-indexed: an older copy of its vector lands in another segment.
            agent.write(SUBJECT, draft("preference", "Vegetarian", key="key-diet-q7f3", tags=["tag-diet-q7f3"]),
                        consistency=svc.CONSISTENCY_WAIT_INDEXED)
            kept = _write(agent, NEIGHBOUR, draft("fact", "Lives in Lyon", key="key-kept-k2m9", tags=["tag-kept-k2m9"]))
    finally:
        assert process.stop() == 0
    vectors = stored_vectors(private_database, milvus_dir / "memoryd.db", tenant, [first, *rest, *kept])
    assert set(vectors) == {first, *rest, *kept}

    def needles(*ids: str) -> dict[str, bytes]:
        return {**{f"id {i}": i.encode() for i in ids},
                **{f"vector {i}": struct.pack(f"<{len(vectors[i])}f", *vectors[i]) for i in ids}}

    purged_by_id = needles(first)
    purged_with_subject = needles(*rest) | {"subject": SUBJECT.encode()}
    still_there = needles(*kept) | {"neighbour": NEIGHBOUR.encode()}
    # Keys and tags are never there at all: the index holds their labels (test_keys_at_rest).
    names = {"key": b"key-city-q7f3", "tag": b"tag-first-q7f3", "tags": b"tag-event-q7f3",
             "diet tag": b"tag-diet-q7f3", "diet key": b"key-diet-q7f3", "kept tag": b"tag-kept-k2m9"}
    assert residue(milvus_dir, names) == {}
    # The scan finds what is there: everything else, before the purge.
    assert set(residue(milvus_dir, purged_by_id | purged_with_subject | still_there)) == \
        set(purged_by_id | purged_with_subject | still_there)

    process = _server(tmp_path, private_database, key_file).start()
    try:
        with grpc.insecure_channel(process.target) as channel:
            agent = agent_with_view(channel, key_file, tenant)
            receipt = agent.erase(SUBJECT, mode=svc.ERASE_MODE_PURGE, ids=svc.MemoryIds(ids=[first])).receipt
            assert receipt.verified and receipt.counts.memories == 1
            assert residue(milvus_dir, purged_by_id) == {}
            assert set(residue(milvus_dir, purged_with_subject | still_there)) == set(purged_with_subject | still_there)

            receipt = agent.erase(SUBJECT, mode=svc.ERASE_MODE_PURGE, all_of_subject=True).receipt
            assert receipt.verified and receipt.counts.memories == 2
            assert residue(milvus_dir, purged_by_id | purged_with_subject) == {}
            assert set(residue(milvus_dir, still_there)) == set(still_there)
            assert [m.text for m in agent.list_all(NEIGHBOUR)] == ["Lives in Lyon"]
    finally:
        assert process.stop() == 0
    # Nothing comes back when the files are read again at the next start either.
    assert residue(milvus_dir, purged_by_id | purged_with_subject) == {}
    with psycopg.connect(private_database) as conn:
        logged = [r[0] for r in conn.execute("SELECT unchecked FROM erasure_checks WHERE tenant_id = %s",
                                             (tenant,)).fetchall()]
    # Compaction was confirmed and the files read back: only what no process can see is unchecked.
    assert logged == [["backups", "postgres_wal_and_dead_tuples"]] * 2


def _loose(path: Path) -> list[str]:
    return [f"{p.relative_to(path)} {stat.filemode(p.lstat().st_mode)}" for p in [path, *path.rglob("*")]
            if not p.is_symlink() and p.lstat().st_mode & 0o077]


@pytest.mark.parametrize("earlier", [False, True], ids=["fresh", "left-readable-by-an-earlier-run"])
def test_every_file_under_the_data_dir_is_the_owners_alone(tmp_path, private_database, key_file, earlier):
    data_dir = tmp_path / "data"
    if earlier:  # an older memoryd (or a looser umask) left these readable
        (data_dir / "milvus").mkdir(parents=True, mode=0o755)
        os.chmod(data_dir, 0o755)
        os.chmod(data_dir / "milvus", 0o755)
        (data_dir / "milvus" / "old-segment.parquet").write_bytes(b"x")
        os.chmod(data_dir / "milvus" / "old-segment.parquet", 0o644)
    process = _server(tmp_path, private_database, key_file).start()
    try:
        with grpc.insecure_channel(process.target) as channel:
            agent = agent_with_view(channel, key_file, unique("tenant"))
            ids = _write(agent, "alice", draft("fact", "Lives in Porto", key="home_city", tags=["home"]),
                         draft("event", "Visited Lisbon"))
            agent.erase("alice", mode=svc.ERASE_MODE_PURGE, ids=svc.MemoryIds(ids=ids[:1]))
            assert list((data_dir / "milvus").rglob("*.parquet"))  # the index did write files
            assert _loose(data_dir) == []
    finally:
        assert process.stop() == 0
    assert _loose(data_dir) == []
