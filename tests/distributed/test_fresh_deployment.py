"""Issue 39 item 1: a fresh deployment whose worker starts before any server.

`memoryd migrate` registers no embedding model; a server registers its model when it starts.
A `memoryd worker` started first therefore has no collection to write until it re-reads the
models. Its index work must wait for that — never be settled without its vectors — so a
`CONSISTENCY_WAIT_INDEXED` write that answers `indexed` is found by meaning.

The worker's periodic refresh is set far out (300 s) so that the order is certain, not a race
with the default 10 s: only re-reading the models on its own while it cannot write (the fix)
lets it index anything within the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from memoryd.v1 import memory_service_pb2 as svc

from ..support import Agent, draft, full_view, put_view, token_for, unique
from ..support_distributed import Deployment, ExternalPostgres, MilvusStandalone
from .conftest import new_deployment

pytestmark = pytest.mark.slow
WAIT = svc.CONSISTENCY_WAIT_INDEXED
TOPICS = ["keeps bees on the roof and sells the honey", "plays the cello in an amateur orchestra",
          "is allergic to peanuts and carries an epinephrine pen"]


@pytest.fixture(scope="module")
def keys(pg15: ExternalPostgres, milvus_standalone: MilvusStandalone,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The shared keys folder, made by a server's first start on a database of its own — so
    the deployments below start from keys, as pods do from their secrets, and a database in
    which no model was ever registered."""
    seed = new_deployment(pg15, milvus_standalone, tmp_path_factory.mktemp("seed"))
    seed.start_replica().stop()
    yield seed.keys


@pytest.mark.parametrize("routing", ["partition", "partition_key"], ids=["partition", "partition-key"])
def test_a_worker_started_before_any_server_indexes_every_write_it_answered_indexed(
        pg15: ExternalPostgres, milvus_standalone: MilvusStandalone, keys: Path, routing: str,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp(f"fresh-{routing}")
    owner_dsn = pg15.create_owner_database(unique("memoryd").replace("-", "_"))
    deployment = Deployment(pg15, milvus_standalone, owner_dsn, keys, root)
    done = deployment.migrate()
    assert done.returncode == 0, done.stderr
    settings = {"MEMORYD_MILVUS_ROUTING": routing}
    try:
        worker = deployment.start_worker(**settings, MEMORYD_INDEX_REFRESH_SECONDS="300")
        replica = deployment.start_replica(**settings)
        signing = keys / "signing.pem"
        with grpc.insecure_channel(replica.target) as channel:
            written: dict[str, list[str]] = {}
            for n in range(3):
                tenant = unique(f"fresh{n}")
                put_view(channel, signing, tenant, full_view("agent-1"))
                agent = Agent(channel, token_for(signing, tenant))
                answer = agent.write("alice", *(draft("fact", f"Alice {topic}") for topic in TOPICS),
                                     consistency=WAIT)
                assert answer.indexed, worker.log_path.read_text()[-2000:]
                written[tenant] = [r.memory_id for r in answer.results]
            for tenant, ids in written.items():
                agent = Agent(channel, token_for(signing, tenant))
                found = agent.call("Recall", svc.RecallRequest(subject="alice", query="what are Alice's hobbies",
                                                               top_k=10, min_relevance=0.0))
                assert not found.degraded
                # Every memory came from the dense channel: its vector was written.
                assert {m.memory.id: m.dense_rank > 0 for m in found.memories} == dict.fromkeys(ids, True)
        assert "index work waits here" in worker.log_path.read_text()  # said once why it waited
    finally:
        deployment.stop_all()
