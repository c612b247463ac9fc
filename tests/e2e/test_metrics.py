"""Metrics: a server with MEMORYD_METRICS_ADDR serves them over HTTP; a scenario shows in them."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from memoryd.v1 import memory_service_pb2 as svc

from ..support import ServerProcess, agent_with_view, draft, fails, free_port, server_env, unique

RECALL = {"rpc_service": "memoryd.v1.MemoryService", "rpc_method": "Recall"}


@pytest.fixture
def metered(tmp_path, private_database, key_file) -> Iterator[tuple[ServerProcess, str]]:
    port = free_port()
    env = server_env(MEMORYD_DATA_DIR=str(tmp_path), MEMORYD_POSTGRES_DSN=private_database,
                     MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_METRICS_ADDR=f"127.0.0.1:{port}",
                     MEMORYD_METRICS_REFRESH_SECONDS="1")
    process = ServerProcess(env, tmp_path / "server.log").start()
    yield process, f"http://127.0.0.1:{port}/metrics"
    process.stop()


def scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    return [(s.name, s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples]


def value(samples: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float | None:
    found = [v for n, l, v in samples if n == name and labels.items() <= l.items()]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


def test_a_scenario_shows_in_the_scraped_metrics(metered, key_file):
    process, url = metered
    tenant, other = unique("tenant"), unique("tenant")
    with grpc.insecure_channel(process.target) as channel:
        agent = agent_with_view(channel, key_file, tenant)
        written = agent.write("alice", draft("fact", "Alice lives in Lisbon", key="home"),
                              draft("preference", "Alice prefers tea over coffee", key="drink"),
                              draft("event", "Alice flew to Naxos in May"),
                              consistency=svc.CONSISTENCY_WAIT_INDEXED)
        assert written.indexed
        agent_with_view(channel, key_file, other).write("bob", draft("fact", "Bob lives in Oslo", key="home"))
        assert agent.recall_keys("alice", "home").memories  # a hit (keyed)
        hit = agent.call("Recall", svc.RecallRequest(subject="alice", query="where does Alice live", top_k=3))
        assert hit.memories  # a hit (free text)
        assert not agent.recall_keys("alice", "no-such-key").memories  # a miss
        assert not agent.recall_keys("nobody", "home").memories  # a miss
        erased = agent.erase("alice", ids=svc.MemoryIds(ids=[written.results[2].memory_id]))
        assert erased.receipt.counts.memories == 1
        bad = fails(agent.memory.Recall, svc.RecallRequest(subject=""), metadata=agent.metadata, timeout=10)
        assert bad.code == grpc.StatusCode.INVALID_ARGUMENT

    invalid = str(grpc.StatusCode.INVALID_ARGUMENT.value[0])
    deadline = time.monotonic() + 30
    while True:  # the database-backed gauges are re-read every second
        samples = scrape(url)
        if (value(samples, "memoryd_memories_active", memoryd_tenant=tenant) == 2
                and value(samples, "memoryd_memories_active", memoryd_tenant=other) == 1):
            break
        assert time.monotonic() < deadline, [s for s in samples if s[0] == "memoryd_memories_active"]
        time.sleep(0.5)

    # RPC durations per method and status code.
    assert value(samples, "memoryd_rpc_duration_seconds_count", rpc_grpc_status_code="0", **RECALL) == 4
    assert value(samples, "memoryd_rpc_duration_seconds_count", rpc_grpc_status_code=invalid, **RECALL) == 1
    assert value(samples, "memoryd_rpc_duration_seconds_count", rpc_method="Write", rpc_grpc_status_code="0") == 2
    assert value(samples, "memoryd_rpc_duration_seconds_count", rpc_method="Erase", rpc_grpc_status_code="0") == 1
    assert value(samples, "memoryd_rpc_duration_seconds_count", rpc_method="PutView",
                 rpc_grpc_status_code="0") == 2
    assert value(samples, "memoryd_rpc_duration_seconds_bucket", rpc_grpc_status_code="0", le="+Inf",
                 **RECALL) == 4
    assert (value(samples, "memoryd_rpc_duration_seconds_sum", rpc_grpc_status_code="0", **RECALL) or 0) > 0
    # Recall hit rate: 2 of the 4 answered Recalls returned something; the refused one is not counted.
    assert value(samples, "memoryd_recall_requests_total") == 4
    assert value(samples, "memoryd_recall_hits_total") == 2
    assert value(samples, "memoryd_recall_degraded_total") == 0
    assert value(samples, "memoryd_memories_erased_total", mode="purge") == 1
    # The outbox and lifecycle gauges are there (the outbox has caught up: nothing is dead).
    assert value(samples, "memoryd_outbox_dead_letters") == 0
    assert value(samples, "memoryd_outbox_pending") is not None
    assert value(samples, "memoryd_outbox_lag_seconds") is not None
    assert value(samples, "memoryd_memories_forgotten_total", reason="expired") == 0
    assert value(samples, "memoryd_extraction_jobs_total", outcome="queued") == 0
    assert value(samples, "memoryd_extraction_parse_failures_total") == 0
    # Labels name tenants (memories per tenant only), never subjects or content.
    labels = " ".join(str(l) for _, l, _ in samples)
    assert "alice" not in labels and "Lisbon" not in labels
    assert tenant not in " ".join(str(l) for n, l, _ in samples if n != "memoryd_memories_active")
