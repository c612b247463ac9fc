"""An OpenAI-compatible embedding endpoint that fails: writes stay safe, Recall degrades,
index work dead-letters after its tries (shown in the metrics) and is replayed with
`memoryd outbox replay`."""

from __future__ import annotations

import subprocess
import urllib.request

import grpc
import psycopg
from prometheus_client.parser import text_string_to_metric_families

from memoryd.storage import EmbeddedPostgres
from memoryd.v1 import memory_service_pb2 as svc

from ..support import (MEMORYD, ROOT, ServerProcess, agent_with_view, draft, free_port, server_env, unique,
                       wait_until)
from ..support_fake_openai import FakeOpenAI


def test_embedder_outage_keeps_writes_degrades_recall_and_dead_letters_until_replayed(tmp_path, key_file):
    pg = EmbeddedPostgres(tmp_path / "pg")  # own database: the embedding model registry is per database
    pg.start()
    data_dir = tmp_path / "memoryd"  # not around PostgreSQL's folder: the server makes its data dir 0700
    data_dir.mkdir()
    metrics_port = free_port()
    try:
        with FakeOpenAI(dim=8) as fake:
            env = server_env(
                MEMORYD_DATA_DIR=str(data_dir), MEMORYD_POSTGRES_DSN=pg.owner_dsn,
                MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_EMBEDDER="openai",
                MEMORYD_EMBEDDER_URL=fake.base_url, MEMORYD_EMBEDDER_MODEL="fake-embed",
                MEMORYD_OUTBOX_MAX_ATTEMPTS="2", MEMORYD_METRICS_ADDR=f"127.0.0.1:{metrics_port}",
                MEMORYD_METRICS_REFRESH_SECONDS="1",
            )
            metrics = f"http://127.0.0.1:{metrics_port}/metrics"
            process = ServerProcess(env, tmp_path / "server.log").start()
            try:
                with grpc.insecure_channel(process.target) as channel:
                    agent = agent_with_view(channel, key_file, unique("tenant"))
                    fake.fail_next(*["500"] * 1000)

                    written = agent.write("alice", draft("event", "Alice renewed her passport in March"))
                    assert not written.indexed
                    memory_id = written.results[0].memory_id
                    during = agent.call("Recall", svc.RecallRequest(subject="alice", query="passport renewal"))
                    assert during.degraded
                    assert [m.memory.id for m in during.memories] == [memory_id]  # keywords still find it

                    wait_until(lambda: "dead letters: 1" in _outbox(env, "status"), timeout=60, interval=0.5,
                               what="the failing work becomes a dead letter")

                    _wait_for_dead_letters(metrics, 1)  # the operator sees them without the CLI

                    fake.recover()
                    assert "replaying 1 dead letter(s)" in _outbox(env, "replay")
                    def indexed() -> bool:
                        after = agent.call("Recall", svc.RecallRequest(subject="alice", query="passport renewal"))
                        return not after.degraded and bool(after.memories) and after.memories[0].dense_rank == 1

                    wait_until(indexed, timeout=60, interval=0.5, what="the replayed work reaches the index")
                    assert "pending: 0  dead letters: 0" in _outbox(env, "status")
                    _wait_for_dead_letters(metrics, 0)
            finally:
                assert process.stop() == 0
        with psycopg.connect(pg.owner_dsn) as conn:
            reasons = conn.execute("SELECT count(*) FROM outbox").fetchone()
        assert reasons == (0,)
    finally:
        pg.stop()


def _outbox(env: dict[str, str], command: str) -> str:
    result = subprocess.run([*MEMORYD, "outbox", command], env=env, cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _wait_for_dead_letters(url: str, expected: float) -> None:
    """The scraped memoryd_outbox_dead_letters gauge reaches ``expected`` (it is re-read every second)."""
    def gauge() -> list[float]:
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        return [s.value for family in text_string_to_metric_families(text) for s in family.samples
                if s.name == "memoryd_outbox_dead_letters"]

    wait_until(lambda: gauge() == [expected], interval=0.5, diagnose=lambda: f"the gauge is {gauge()}",
               what=f"memoryd_outbox_dead_letters is {expected}")
