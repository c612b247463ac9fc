"""A tenant that outgrows Milvus Lite is named in one warning in the server's log (docs/scaling.md,
"Large tenants belong on a Milvus server"): once per tenant per process, never for a tenant
below the size, never when the index is reached over the network (MEMORYD_MILVUS_URI).

The size is lowered to 5 memories through MEMORYD_LITE_TENANT_WARNING, as an operator would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from memoryd.v1 import memory_service_pb2 as svc

from ..support import Agent, MilvusServer, ServerProcess, agent_with_view, draft, server_env, unique, wait_until

LIMIT = 5
WARNING = "MEMORYD_LITE_TENANT_WARNING"


def _server(tmp_path: Path, private_database: str, key_file: Path, **settings: str) -> ServerProcess:
    env = server_env(MEMORYD_DATA_DIR=str(tmp_path / "memoryd"), MEMORYD_POSTGRES_DSN=private_database,
                     MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_LITE_TENANT_WARNING=str(LIMIT), **settings)
    (tmp_path / "memoryd").mkdir()
    return ServerProcess(env, tmp_path / "server.log").start(timeout=120)


@pytest.fixture
def on_lite(tmp_path: Path, private_database: str, key_file: Path) -> Iterator[ServerProcess]:
    process = _server(tmp_path, private_database, key_file)  # MEMORYD_MILVUS_URI empty: Milvus Lite
    yield process
    process.stop()


def _grow(agent: Agent, name: str, count: int) -> None:
    """``count`` new memories, searchable when this returns."""
    items = [draft("event", f"{name} note {i}: the courier left parcel {i} at the back door") for i in range(count)]
    response = agent.write("alice", *items, consistency=svc.CONSISTENCY_WAIT_INDEXED)
    assert response.indexed and len(response.results) == count


def _warnings(process: ServerProcess, tenant: str) -> list[str]:
    return [line for line in process.log_path.read_text().splitlines()
            if WARNING in line and f"tenant {tenant} " in line]


def test_a_tenant_past_the_size_is_named_in_one_warning_with_its_size_and_the_fix(on_lite: ServerProcess,
                                                                                  key_file: Path):
    big, small, sentinel = unique("big"), unique("small"), unique("sentinel")
    with grpc.insecure_channel(on_lite.target) as channel:
        agents = {tenant: agent_with_view(channel, key_file, tenant) for tenant in (big, small, sentinel)}
        _grow(agents[big], "first", 4)
        _grow(agents[small], "small", 3)
        assert _warnings(on_lite, big) == []  # 4 memories: not past 5

        _grow(agents[big], "second", 3)  # 7 memories
        [line] = wait_until(lambda: _warnings(on_lite, big), timeout=30, what="the big tenant's warning")
        assert " WARNING " in line
        assert f"tenant {big} has 7 memories, more than {LIMIT} ({WARNING})" in line
        assert "Milvus Lite" in line and "MEMORYD_MILVUS_URI" in line
        assert "courier" not in line and "alice" not in line  # no content, no subject

        _grow(agents[big], "third", 6)  # 13
        _grow(agents[sentinel], "sentinel", LIMIT + 1)  # past the size with its first Write
    # A stopped server has finished every batch it took (and its checks), so the log is final.
    assert on_lite.stop() == 0
    assert len(_warnings(on_lite, big)) == 1  # once per tenant, however much more it grows
    assert len(_warnings(on_lite, sentinel)) == 1
    assert _warnings(on_lite, small) == []


def test_no_warning_when_the_index_is_a_milvus_reached_over_the_network(tmp_path: Path, private_database: str,
                                                                      key_file: Path, milvus: MilvusServer):
    process = _server(tmp_path, private_database, key_file, MEMORYD_MILVUS_URI=milvus.uri)
    tenant = unique("tenant")
    try:
        with grpc.insecure_channel(process.target) as channel:
            agent = agent_with_view(channel, key_file, tenant)
            _grow(agent, "remote", LIMIT + 3)
    finally:
        assert process.stop() == 0  # every batch it took is finished: the log is final
    assert WARNING not in process.log_path.read_text()
