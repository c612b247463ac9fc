"""memoryd.client (clients/python) against the suite's real server, and its retries against a
small real gRPC server in the test process that fails on purpose."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
import pytest

from memoryd.client import (
    TLS,
    AsyncMemorydClient,
    FailedPrecondition,
    InvalidArgument,
    MemorydClient,
    MemorydError,
    NotFound,
    PermissionDenied,
    RetryPolicy,
    Unauthenticated,
    Unavailable,
)
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import memory_service_pb2_grpc as svc_grpc

from ..support_tls import Authority
from ..support import ServerProcess, full_view, put_view, token_for, unique

FAST = RetryPolicy(max_attempts=4, initial_backoff=0.01, max_backoff=0.05)


def pref(key: str, text: str, **kwargs: Any) -> pb.MemoryDraft:
    return pb.MemoryDraft(category=pb.CATEGORY_PREFERENCE, key=key, text=text, **kwargs)


@pytest.fixture
def tenant_of_client() -> str:
    return unique("client-tenant")


@pytest.fixture
def token(channel: grpc.Channel, key_file: Path, tenant_of_client: str) -> str:
    put_view(channel, key_file, tenant_of_client, full_view("py-agent"))
    return token_for(key_file, tenant_of_client, "py-agent")


@pytest.fixture
def client(server: ServerProcess, token: str) -> Iterator[MemorydClient]:
    with MemorydClient(server.target, token=token, retry=FAST) as c:
        yield c


# --- every RPC, blocking ------------------------------------------------------------------

def test_write_recall_history_and_erase_through_the_blocking_client(client: MemorydClient):
    first = client.write(subject="alice", items=[pref("drink", "Tea")], consistency=svc.CONSISTENCY_WAIT_INDEXED)
    memory_id = first.results[0].memory_id
    assert first.results[0].outcome == svc.WRITE_OUTCOME_CREATED
    # A request message works as well as its fields.
    second = client.write(svc.WriteRequest(subject="alice", items=[pref("drink", "Coffee")]))
    assert (second.results[0].outcome, second.results[0].memory_id) == (svc.WRITE_OUTCOME_UPDATED, memory_id)

    assert [m.memory.text for m in client.recall(subject="alice", keys=["drink"]).memories] == ["Coffee"]
    history = client.get_history(subject="alice", memory_id=memory_id)
    assert [v.memory.text for v in history.versions] == ["Coffee", "Tea"]

    receipt = client.erase(subject="alice", key="drink", mode=svc.ERASE_MODE_PURGE, reason="test").receipt
    assert (receipt.verified, receipt.counts.memories) == (True, 1)
    assert list(client.recall(subject="alice", keys=["drink"]).memories) == []


def test_iter_memories_walks_every_page(client: MemorydClient):
    client.write(subject="bob", items=[pref(f"k{i}", f"value {i}") for i in range(5)])
    page = client.memory_view(subject="bob", page_size=2)
    assert len(page.memories) == 2 and page.next_page_token
    assert sorted(m.text for m in client.iter_memories(subject="bob", page_size=2)) == [
        f"value {i}" for i in range(5)]


def test_export_then_import_into_another_subject(client: MemorydClient):
    client.write(subject="carol", items=[pref("city", "Lyon"), pref("pet", "cat")])
    archive = client.export_memories(subject="carol", passphrase="correct horse battery")
    assert archive.memories == 2
    imported = client.import_memories(subject="carol-copy", archive=archive.archive, passphrase="correct horse battery")
    assert len(imported.results) == 2
    assert sorted(m.text for m in client.iter_memories(subject="carol-copy")) == ["Lyon", "cat"]


def test_resolve_conflict_accepts_a_pending_value(server: ServerProcess, channel: grpc.Channel, key_file: Path,
                                                  tenant_of_client: str, client: MemorydClient):
    sync = client.write(subject="dan", items=[pref("drink", "Tea", source_kind=pb.SOURCE_KIND_SYNC)])
    memory_id = sync.results[0].memory_id
    put_view(channel, key_file, tenant_of_client, full_view("chat"))
    with MemorydClient(server.target, token=token_for(key_file, tenant_of_client, "chat")) as chat:
        held = chat.write(subject="dan", items=[pref("drink", "Coffee")])
    assert held.results[0].outcome == svc.WRITE_OUTCOME_PENDING
    [memory] = client.iter_memories(subject="dan")
    resolved = client.resolve_conflict(subject="dan", memory_id=memory_id, pending_id=memory.pending[0].id,
                                       resolution=svc.CONFLICT_RESOLUTION_ACCEPT_PENDING)
    assert resolved.memory.text == "Coffee"


def test_extraction_calls_raise_typed_errors(client: MemorydClient):
    with pytest.raises(FailedPrecondition) as no_model:
        turn = pb.Turn(turn_id="t1", speaker="user", text="I live in Lyon", time=Timestamp(seconds=1_700_000_000))
        client.write(subject="erin", turns=[turn])
    assert no_model.value.reason == "EXTRACTION_NOT_CONFIGURED"
    with pytest.raises(NotFound):
        client.get_extraction_job(subject="erin", job_id=str(uuid.uuid4()))


def test_view_admin_calls(server: ServerProcess, key_file: Path, tenant_of_client: str):
    admin_token = token_for(key_file, tenant_of_client, "py-admin", roles=("admin",))
    with MemorydClient(server.target, token=admin_token) as admin:
        stored = admin.put_view(view=full_view("agent-a"))
        assert stored.view.agent == "agent-a" and stored.changed
        admin.put_view(view=full_view("agent-b"))
        assert admin.get_view(agent="agent-a").view.version == stored.view.version
        assert {v.agent for v in admin.iter_views(page_size=1)} == {"agent-a", "agent-b"}
        assert admin.delete_view(agent="agent-b").deleted
        assert [v.agent for v in admin.list_views().views] == ["agent-a"]


def test_a_session_ended_on_one_client_is_resumed_on_another(server: ServerProcess, client: MemorydClient,
                                                             token: str):
    client.write(subject="gus", session_id="chat-1", items=[pref("seat", "aisle")])
    ended = client.end_session(subject="gus", session_id="chat-1").snapshot
    assert ended.session_id == "chat-1" and [m.text for m in ended.explicit] == ["aisle"]
    assert ended.summary.key == "session.summary"

    async def on_another_device() -> svc.ResumeSessionResponse:
        async with AsyncMemorydClient(server.target, token=token, retry=FAST) as other:
            return await other.resume_session(subject="gus")

    resumed = asyncio.run(on_another_device()).snapshot
    assert (resumed.session_id, [m.text for m in resumed.explicit]) == ("chat-1", ["aisle"])
    with pytest.raises(NotFound):
        client.resume_session(subject="nobody-yet")


# --- typed errors from the real server -------------------------------------------------------

def test_bad_input_raises_invalid_argument_with_every_violation(client: MemorydClient):
    with pytest.raises(InvalidArgument) as raised:
        client.write(subject="", items=[pb.MemoryDraft(category=pb.CATEGORY_EVENT, key="nope", text="")])
    error = raised.value
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT and error.reason == "INVALID_REQUEST"
    assert set(error.violations) == {"subject", "items[0].key", "items[0].text"}
    assert error.request_id and error.domain == "memoryd"
    assert any(type(d).__name__ == "BadRequest" for d in error.details)


def test_credential_and_view_failures_are_typed(server: ServerProcess, key_file: Path, tenant_of_client: str):
    with MemorydClient(server.target) as anonymous, pytest.raises(Unauthenticated) as missing:
        anonymous.recall(subject="alice", keys=["drink"])
    assert missing.value.reason == "TOKEN_MISSING"
    stranger_token = token_for(key_file, tenant_of_client, "no-view-agent")
    with MemorydClient(server.target, token=stranger_token) as stranger, pytest.raises(PermissionDenied) as denied:
        stranger.recall(subject="alice", keys=["drink"])
    assert denied.value.reason == "VIEW_MISSING" and isinstance(denied.value, MemorydError)


# --- the asyncio client -----------------------------------------------------------------------

async def test_the_asyncio_client_writes_pages_and_raises_typed_errors(server: ServerProcess, token: str):
    async with AsyncMemorydClient(server.target, token=token, retry=FAST) as client:
        written = await client.write(subject="fay", items=[pref(f"k{i}", f"v{i}") for i in range(3)])
        assert [r.outcome for r in written.results] == [svc.WRITE_OUTCOME_CREATED] * 3
        recalled = await client.recall(subject="fay", keys=["k1"])
        assert recalled.memories[0].memory.text == "v1"
        assert sorted([m.text async for m in client.iter_memories(subject="fay", page_size=2)]) == ["v0", "v1", "v2"]
        history = await client.get_history(subject="fay", memory_id=written.results[0].memory_id)
        assert [v.memory.text for v in history.versions] == ["v0"]
        exported = await client.export_memories(subject="fay")
        assert exported.memories == 3
        with pytest.raises(InvalidArgument) as raised:
            await client.write(subject="", items=[pref("k", "v")])
        assert "subject" in raised.value.violations and raised.value.request_id
        erased = await client.erase(subject="fay", all_of_subject=True, mode=svc.ERASE_MODE_PURGE)
        assert erased.receipt.counts.memories == 3


# --- retries, against a server that fails on purpose -----------------------------------------

class Flaky(svc_grpc.MemoryServiceServicer):
    """Fails the first ``failures`` calls of each method with ``code``, then answers."""

    def __init__(self, failures: int, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE) -> None:
        self.failures, self.code = failures, code
        self.requests: list[Any] = []
        self.metadata: list[dict[str, str]] = []
        self.lock = threading.Lock()

    def _answer(self, request: Any, context: grpc.ServicerContext, response: Any) -> Any:
        with self.lock:
            self.requests.append(request)
            self.metadata.append({m.key: m.value for m in context.invocation_metadata()})
            failing = len(self.requests) <= self.failures
        if failing:
            context.abort(self.code, "flaky on purpose")
        return response

    def Write(self, request: svc.WriteRequest, context: grpc.ServicerContext) -> svc.WriteResponse:
        return self._answer(request, context, svc.WriteResponse(results=[svc.WriteResult(memory_id="m-1")]))

    def Recall(self, request: svc.RecallRequest, context: grpc.ServicerContext) -> svc.RecallResponse:
        return self._answer(request, context, svc.RecallResponse())

    def ResolveConflict(self, request: Any, context: grpc.ServicerContext) -> svc.ResolveConflictResponse:
        return self._answer(request, context, svc.ResolveConflictResponse())

    def ImportMemories(self, request: Any, context: grpc.ServicerContext) -> svc.ImportMemoriesResponse:
        return self._answer(request, context, svc.ImportMemoriesResponse())


@pytest.fixture
def flaky_server() -> Iterator[Any]:
    servers: list[grpc.Server] = []

    def start(servicer: Flaky) -> str:
        grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        svc_grpc.add_MemoryServiceServicer_to_server(servicer, grpc_server)
        port = grpc_server.add_insecure_port("127.0.0.1:0")
        grpc_server.start()
        servers.append(grpc_server)
        return f"127.0.0.1:{port}"

    yield start
    for s in servers:
        s.stop(None)


def test_unavailable_is_retried_with_the_same_generated_idempotency_key(flaky_server: Any):
    flaky = Flaky(failures=2)
    with MemorydClient(flaky_server(flaky), token="t", retry=FAST) as client:
        response = client.write(subject="alice", items=[pref("drink", "Tea")])
    assert response.results[0].memory_id == "m-1"
    keys = [r.idempotency_key for r in flaky.requests]
    assert len(keys) == 3 and len(set(keys)) == 1 and uuid.UUID(keys[0])


def test_a_given_idempotency_key_is_kept(flaky_server: Any):
    flaky = Flaky(failures=1)
    with MemorydClient(flaky_server(flaky), retry=FAST) as client:
        client.write(subject="alice", items=[pref("drink", "Tea")], idempotency_key="mine-1")
    assert [r.idempotency_key for r in flaky.requests] == ["mine-1", "mine-1"]


def test_retries_stop_after_max_attempts_with_unavailable(flaky_server: Any):
    flaky = Flaky(failures=10)
    with MemorydClient(flaky_server(flaky), retry=FAST) as client, pytest.raises(Unavailable) as raised:
        client.recall(subject="alice", keys=["drink"])
    assert len(flaky.requests) == FAST.max_attempts and raised.value.message == "flaky on purpose"


@pytest.mark.parametrize("code", [grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.INTERNAL],
                         ids=["invalid-argument", "internal"])
def test_other_codes_are_never_retried(flaky_server: Any, code: grpc.StatusCode):
    flaky = Flaky(failures=1, code=code)
    with MemorydClient(flaky_server(flaky), retry=FAST) as client, pytest.raises(MemorydError) as raised:
        client.write(subject="alice", items=[pref("drink", "Tea")])
    assert raised.value.code == code and len(flaky.requests) == 1


@pytest.mark.parametrize("method", ["resolve_conflict", "import_memories"])
def test_calls_without_an_idempotency_key_are_not_retried(flaky_server: Any, method: str):
    flaky = Flaky(failures=1)
    with MemorydClient(flaky_server(flaky), retry=FAST) as client, pytest.raises(Unavailable):
        getattr(client, method)(subject="alice")
    assert len(flaky.requests) == 1


async def test_the_asyncio_client_retries_unavailable_too(flaky_server: Any):
    flaky = Flaky(failures=2)
    async with AsyncMemorydClient(flaky_server(flaky), retry=FAST) as client:
        await client.write(subject="alice", items=[pref("drink", "Tea")])
    assert len(flaky.requests) == 3 and len({r.idempotency_key for r in flaky.requests}) == 1


def test_a_closed_port_then_a_server_is_reached_by_retrying(flaky_server: Any):
    """The first attempts find nothing listening; the server starts during the backoff."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    flaky = Flaky(failures=0)
    started = threading.Timer(0.3, lambda: _serve_on(port, flaky))
    started.start()
    slow = RetryPolicy(max_attempts=8, initial_backoff=0.1, max_backoff=0.5, jitter=0.0)
    try:
        with MemorydClient(f"127.0.0.1:{port}", retry=slow, timeout=5) as client:
            client.recall(subject="alice", keys=["drink"])
    finally:
        started.join()
        _SERVERS.pop().stop(None)
    assert len(flaky.requests) == 1


_SERVERS: list[grpc.Server] = []


def _serve_on(port: int, servicer: Flaky) -> None:
    grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    svc_grpc.add_MemoryServiceServicer_to_server(servicer, grpc_server)
    grpc_server.add_insecure_port(f"127.0.0.1:{port}")
    grpc_server.start()
    _SERVERS.append(grpc_server)


def test_the_readme_examples_run(server: ServerProcess, token: str, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]):
    import re

    from ..support import ROOT

    readme = ROOT / "clients" / "python" / "README.md"
    section = readme.read_text().split("\n## Example\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 2
    token_file = tmp_path / "demo-agent.token"
    token_file.write_text(token)
    for block in blocks:
        code = block.replace("127.0.0.1:50051", server.target).replace(".memoryd/tokens/demo-agent.token",
                                                                        str(token_file))
        exec(compile(code, str(readme), "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out.splitlines()
    # The query's answer, then the conversation's (its latest user turn asks for the home city).
    assert printed[0].startswith("Lyon ") and printed[1].startswith("Lyon ")
    assert "home_city Lyon" in printed and printed[-1] == "Lyon"


def test_mutual_tls_names_the_caller_from_pem_files(tls_server: ServerProcess, ca: Authority, tmp_path: Path):
    tenant = unique("tenant")
    issued = ca.agent(tenant, "payment-agent")
    for name, content in {"ca.pem": ca.pem, "agent.pem": issued.cert_pem, "agent-key.pem": issued.key_pem}.items():
        (tmp_path / name).write_bytes(content)
    tls = TLS(ca_cert=tmp_path / "ca.pem", client_cert=str(tmp_path / "agent.pem"),
              client_key=tmp_path / "agent-key.pem", server_name="localhost")
    with MemorydClient(tls_server.target, tls=tls) as client:
        with pytest.raises(PermissionDenied):  # the certificate names an agent that has no view yet
            client.recall(subject="alice", keys=["iban"])
        with pytest.raises(ValueError):
            TLS(ca_cert=ca.pem, client_cert=issued.cert_pem).channel_credentials()
    # As the certificate's agent with the admin role (a token naming the same caller adds it).
    admin_token = token_for(Path(tls_server.env["MEMORYD_SIGNING_KEY_FILE"]), tenant, "payment-agent", roles=("admin",))
    with MemorydClient(tls_server.target, tls=tls, token=admin_token) as admin:
        admin.put_view(view=full_view("payment-agent"))
    with MemorydClient(tls_server.target, tls=tls) as client:
        client.write(subject="alice", items=[pb.MemoryDraft(category=pb.CATEGORY_FACT, key="iban", text="ends 0042")])
        [found] = client.recall(subject="alice", keys=["iban"]).memories
    assert found.memory.provenance.agent == "payment-agent"


# --- token providers --------------------------------------------------------------------------

def test_a_token_provider_is_asked_before_every_attempt(flaky_server: Any):
    flaky = Flaky(failures=2)
    issued = iter(["t1", "t2", "t3"])
    with MemorydClient(flaky_server(flaky), token=lambda: next(issued), retry=FAST) as client:
        client.write(subject="alice", items=[pref("drink", "Tea")])
    assert [m["authorization"] for m in flaky.metadata] == ["Bearer t1", "Bearer t2", "Bearer t3"]


@pytest.mark.parametrize("token", ["", None, lambda: ""], ids=["empty", "none", "provider-of-empty"])
def test_an_empty_token_sends_no_authorization(flaky_server: Any, token: Any):
    flaky = Flaky(failures=0)
    with MemorydClient(flaky_server(flaky), token=token, retry=FAST) as client:
        client.recall(subject="alice", keys=["drink"])
    assert "authorization" not in flaky.metadata[0]


async def test_the_asyncio_client_takes_sync_and_async_token_providers(flaky_server: Any):
    flaky = Flaky(failures=1)
    issued = iter(["a1", "a2"])

    async def refreshed() -> str:
        return next(issued)

    target = flaky_server(flaky)
    async with AsyncMemorydClient(target, token=refreshed, retry=FAST) as client:
        await client.write(subject="alice", items=[pref("drink", "Tea")])
    async with AsyncMemorydClient(target, token=lambda: "s1", retry=FAST) as client:
        await client.recall(subject="alice", keys=["drink"])
    assert [m["authorization"] for m in flaky.metadata] == ["Bearer a1", "Bearer a2", "Bearer s1"]


def test_a_provider_swaps_the_token_of_a_running_client(server: ServerProcess, channel: grpc.Channel,
                                                        key_file: Path, tenant_of_client: str):
    """A refreshed token takes effect on the next call, without a new client: here it names
    another agent, which the server then records as the writer."""
    for agent in ("agent-a", "agent-b"):
        put_view(channel, key_file, tenant_of_client, full_view(agent))
    current = {"token": token_for(key_file, tenant_of_client, "agent-a")}
    with MemorydClient(server.target, token=lambda: current["token"], retry=FAST) as client:
        client.write(subject="alice", items=[pref("drink", "Tea")])
        current["token"] = token_for(key_file, tenant_of_client, "agent-b")
        client.write(subject="alice", items=[pref("city", "Oslo")])
        found = {m.memory.key: m.memory.provenance.agent for m in client.recall(subject="alice",
                                                                                keys=["drink", "city"]).memories}
    assert found == {"drink": "agent-a", "city": "agent-b"}


# --- the OpenTelemetry hook ---------------------------------------------------------------------

def test_a_call_inside_an_active_span_carries_its_w3c_trace_context(flaky_server: Any):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState, use_span

    flaky = Flaky(failures=1)
    tracer = TracerProvider().get_tracer("agent")
    with MemorydClient(flaky_server(flaky), retry=FAST) as client:
        client.recall(subject="alice", keys=["drink"])  # no active span: nothing is sent
        with tracer.start_as_current_span("agent-turn") as span:
            client.recall(subject="alice", keys=["drink"])
        remote = SpanContext(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, is_remote=True,
                             trace_flags=TraceFlags(TraceFlags.SAMPLED), trace_state=TraceState([("vendor", "x")]))
        with use_span(NonRecordingSpan(remote)):
            client.recall(subject="alice", keys=["drink"])
    context = span.get_span_context()
    assert "traceparent" not in flaky.metadata[0] and "traceparent" not in flaky.metadata[1]  # refused, then retried
    assert flaky.metadata[2]["traceparent"] == \
        f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
    assert "tracestate" not in flaky.metadata[2]
    assert flaky.metadata[3]["traceparent"] == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert flaky.metadata[3]["tracestate"] == "vendor=x"


def test_the_client_works_without_opentelemetry_installed(flaky_server: Any):
    """In a Python where ``import opentelemetry`` fails, calls still work and carry no trace context."""
    import subprocess
    import sys

    flaky = Flaky(failures=0)
    target = flaky_server(flaky)
    program = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None  # as if opentelemetry-api were not installed\n"
        "from memoryd.client import MemorydClient\n"
        f"with MemorydClient({target!r}, token='t') as client:\n"
        "    client.recall(subject='alice', keys=['drink'])\n"
        "assert 'opentelemetry.trace' not in sys.modules\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    assert flaky.metadata[0]["authorization"] == "Bearer t" and "traceparent" not in flaky.metadata[0]


async def test_a_client_call_in_a_span_joins_the_servers_trace(private_database: str, key_file: Path,
                                                               tmp_path: Path):
    """End to end: the agent's span, the Python client, a real memoryd and its server span."""
    import asyncio

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from memoryd.server import Config, Memoryd

    exporter = InMemorySpanExporter()
    app = Memoryd(Config(data_dir=tmp_path, addr="127.0.0.1:0", postgres_dsn=private_database,
                         signing_key_file=str(key_file)), span_exporter=exporter)
    started = await app.start()
    target = f"127.0.0.1:{started.port}"
    tenant = unique("tenant")
    tracer = TracerProvider().get_tracer("agent")
    try:
        async with AsyncMemorydClient(target, token=token_for(key_file, tenant, "ops", roles=("admin",))) as admin:
            await admin.put_view(view=full_view("py-agent"))
        token = token_for(key_file, tenant, "py-agent")
        with tracer.start_as_current_span("agent-turn") as turn:
            async with AsyncMemorydClient(target, token=token) as client:
                await client.write(subject="alice", items=[pref("drink", "Tea")])

            def blocking_recall() -> None:  # the blocking client, in a thread that inherits the context
                with MemorydClient(target, token=token) as sync_client:
                    sync_client.recall(subject="alice", keys=["drink"])

            await asyncio.to_thread(blocking_recall)
    finally:
        await app.stop()  # flushes the span processor
    turn_context = turn.get_span_context()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    for name in ("memoryd.v1.MemoryService/Write", "memoryd.v1.MemoryService/Recall"):
        server_span = spans[name]
        assert server_span.context.trace_id == turn_context.trace_id, name
        assert server_span.parent is not None and server_span.parent.span_id == turn_context.span_id, name
    assert spans["memoryd.v1.ViewAdminService/PutView"].context.trace_id != turn_context.trace_id
