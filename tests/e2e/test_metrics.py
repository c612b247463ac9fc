"""Metrics: a server with MEMORYD_METRICS_ADDR serves them over HTTP; a scenario shows in them."""

from __future__ import annotations

import platform
import subprocess
import urllib.request
from collections.abc import Iterator
from importlib import metadata

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from memoryd.v1 import memory_service_pb2 as svc

from ..support import (ROOT, ServerProcess, agent_with_view, draft, fails, free_port, server_env, unique,
                       wait_until)

RECALL = {"rpc_system_name": "grpc", "rpc_method": "memoryd.v1.MemoryService/Recall"}
DURATION = "rpc_server_call_duration_seconds"


@pytest.fixture
def metered(tmp_path, private_database, key_file) -> Iterator[tuple[ServerProcess, str]]:
    port = free_port()
    env = server_env(MEMORYD_DATA_DIR=str(tmp_path), MEMORYD_POSTGRES_DSN=private_database,
                     MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_METRICS_ADDR=f"127.0.0.1:{port}",
                     MEMORYD_METRICS_REFRESH_SECONDS="1")
    process = ServerProcess(env, tmp_path / "server.log").start()
    yield process, f"http://127.0.0.1:{port}/metrics"
    process.stop()


def _git_head() -> str:
    """The checkout's commit, or "" where the suite runs from a copy without git."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    return [(s.name, s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples]


def value(samples: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float | None:
    found = [v for n, tags, v in samples if n == name and labels.items() <= tags.items()]
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

    def active_counted() -> list | None:  # the database-backed gauges are re-read every second
        samples = scrape(url)
        if (value(samples, "memoryd_memories_active", memoryd_tenant=tenant) == 2
                and value(samples, "memoryd_memories_active", memoryd_tenant=other) == 1):
            return samples
        return None

    samples = wait_until(active_counted, interval=0.5, what="memoryd_memories_active counts 2 and 1",
                         diagnose=lambda: str([s for s in scrape(url) if s[0] == "memoryd_memories_active"]))

    # RPC durations per method and status code, as OpenTelemetry's RPC conventions name them.
    assert value(samples, f"{DURATION}_count", rpc_response_status_code="OK", **RECALL) == 4
    assert value(samples, f"{DURATION}_count", rpc_response_status_code="INVALID_ARGUMENT", **RECALL) == 1
    assert value(samples, f"{DURATION}_count", error_type="INVALID_ARGUMENT") is None  # the caller's error
    assert value(samples, f"{DURATION}_count", rpc_method="memoryd.v1.MemoryService/Write",
                 rpc_response_status_code="OK") == 2
    assert value(samples, f"{DURATION}_count", rpc_method="memoryd.v1.MemoryService/Erase",
                 rpc_response_status_code="OK") == 1
    assert value(samples, f"{DURATION}_count", rpc_method="memoryd.v1.ViewAdminService/PutView",
                 rpc_response_status_code="OK") == 2
    assert value(samples, f"{DURATION}_bucket", rpc_response_status_code="OK", le="+Inf", **RECALL) == 4
    assert (value(samples, f"{DURATION}_sum", rpc_response_status_code="OK", **RECALL) or 0) > 0
    assert not [n for n, _, _ in samples if n.startswith("memoryd_rpc_duration")]  # the old name is gone
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
    # The process, its Postgres pools (the app role's serves the calls; the worker role's the
    # outbox and the gauges) and which build it runs.
    assert (value(samples, "process_cpu_time_seconds_total", cpu_mode="user") or 0) > 0
    assert (value(samples, "process_memory_usage_bytes") or 0) > 50 * 2**20
    assert (value(samples, "process_unix_file_descriptor_count") or 0) > 3
    assert (value(samples, "process_thread_count") or 0) > 1
    for pool in ("memoryd_app", "memoryd_worker"):
        used = value(samples, "db_client_connection_count", db_client_connection_pool_name=pool,
                     db_client_connection_state="used")
        idle = value(samples, "db_client_connection_count", db_client_connection_pool_name=pool,
                     db_client_connection_state="idle")
        assert used is not None and idle is not None and used + idle >= 1, (pool, used, idle)
        assert value(samples, "db_client_connection_pending_requests", db_client_connection_pool_name=pool) == 0
        assert (value(samples, "db_client_connection_max", db_client_connection_pool_name=pool) or 0) >= 1
    [build] = [tags for n, tags, v in samples if n == "memoryd_build_info" and v == 1]
    assert build["version"] == metadata.version("memoryd") and build["python_version"] == platform.python_version()
    assert build["commit"] == _git_head()  # the server runs from the suite's checkout
    # Labels name tenants (memories per tenant only), never subjects or content.
    labels = " ".join(str(tags) for _, tags, _ in samples)
    assert "alice" not in labels and "Lisbon" not in labels
    assert tenant not in " ".join(str(tags) for n, tags, _ in samples if n != "memoryd_memories_active")
