"""Error reasons: every reason the server and the stores can send is a value of
``memoryd.v1.ErrorReason``, and each class of the domain error tree reaches a caller with its
status code and default reason, decoded by the one decoder (``memoryd.client.from_rpc_error``)
the clients, the CLI and these tests share."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from memoryd import domain
from memoryd.cli._errors import report_rpc_error
from memoryd.client import AsyncMemorydClient, MemorydClient, RetryPolicy, from_rpc_error
from memoryd.client import MemorydError as ClientError
from memoryd.domain import (
    ArchiveInvalid,
    DataKeyUnavailable,
    FailedPrecondition,
    FieldViolation,
    IdempotencyKeyReused,
    Internal,
    InvalidArgument,
    MemorydError,
    NotFound,
    NotImplementedYet,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)
from memoryd.server.rpc._errors import to_status
from memoryd.v1 import error_reason_pb2
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import memory_service_pb2_grpc as svc_grpc

ROOT = Path(__file__).resolve().parents[2]
SCANNED = (ROOT / "server" / "memoryd", ROOT / "storage" / "memoryd")
REASONS = {name.removeprefix("ERROR_REASON_") for name, number in error_reason_pb2.ErrorReason.items() if number}
ERROR_CLASSES = {name: kind for name, kind in vars(domain).items()
                 if isinstance(kind, type) and issubclass(kind, MemorydError)}
REQUEST_ID = "req-reasons-1"
ONCE = RetryPolicy(max_attempts=1)


# --- every reason in the code is in the enum -----------------------------------------------------

def _name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _reasons_in(path: Path) -> Iterator[tuple[str, str | None]]:
    """(where, reason) of every reason the module gives an error: a class's ``reason = "…"``, a
    ``reason="…"`` argument of an error class, a comparison ``….reason == "…"``. None: not a
    literal, so not checkable."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.ClassDef) and (node.name in ERROR_CLASSES
                                               or any(_name(b) in ERROR_CLASSES for b in node.bases)):
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and any(_name(t) == "reason" for t in stmt.targets):
                    yield where, _literal(stmt.value)
                elif isinstance(stmt, ast.AnnAssign) and _name(stmt.target) == "reason" and stmt.value is not None:
                    yield where, _literal(stmt.value)
        elif isinstance(node, ast.Call) and _name(node.func) in ERROR_CLASSES:
            yield from ((where, _literal(k.value)) for k in node.keywords if k.arg == "reason")
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and node.left.attr == "reason":
            # Only UPPER_SNAKE literals: a WriteResult's reason is free text.
            yield from ((where, value) for value in map(_literal, node.comparators)
                        if value is not None and value.replace("_", "").isupper())


def _all_reasons() -> list[tuple[str, str | None]]:
    return [found for folder in SCANNED for path in sorted(folder.rglob("*.py")) if "__pycache__" not in path.parts
            for found in _reasons_in(path)]


def test_every_reason_the_server_and_stores_use_is_an_error_reason():
    found = _all_reasons()
    # The scan reaches both trees: a reason from the server, one from storage, one from the CLI.
    assert {"TOKEN_MISSING", "VIEW_VERSION_CONFLICT", "TOKEN_EXPIRED"} <= {reason for _, reason in found}
    not_literal = [where for where, reason in found if reason is None]
    assert not not_literal, f"a reason that is not a string literal cannot be checked: {not_literal}"
    unknown = [(where, reason) for where, reason in found if reason not in REASONS]
    assert not unknown, f"not values of memoryd.v1.ErrorReason (add them to protos/, then make gen): {unknown}"


# --- each error class reaches the caller with its code and reason ---------------------------------

VIOLATION = FieldViolation("items[0].text", "is required")
CASES = [
    (InvalidArgument(VIOLATION), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST"),
    (ArchiveInvalid(FieldViolation("archive", "is not a memoryd archive")), grpc.StatusCode.INVALID_ARGUMENT,
     "ARCHIVE_INVALID"),
    (Unauthenticated("the bearer token is invalid"), grpc.StatusCode.UNAUTHENTICATED, "TOKEN_INVALID"),
    (PermissionDenied("outside the view"), grpc.StatusCode.PERMISSION_DENIED, "VIEW_DENIED"),
    (NotFound("no such memory"), grpc.StatusCode.NOT_FOUND, "NOT_FOUND"),
    (FailedPrecondition("the schema is too old: run memoryd migrate"), grpc.StatusCode.FAILED_PRECONDITION,
     "SERVER_MISCONFIGURED"),
    (IdempotencyKeyReused(), grpc.StatusCode.FAILED_PRECONDITION, "IDEMPOTENCY_KEY_REUSED"),
    (DataKeyUnavailable(), grpc.StatusCode.FAILED_PRECONDITION, "DATA_KEY_UNAVAILABLE"),
    (ResourceExhausted("an archive holds at most 10000 memories"), grpc.StatusCode.RESOURCE_EXHAUSTED,
     "LIMIT_EXCEEDED"),
    (NotImplementedYet("not in this version"), grpc.StatusCode.UNIMPLEMENTED, "NOT_IMPLEMENTED"),
    (Unavailable("the memory store is unavailable; retry later"), grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE"),
    (Internal("postgres error: UniqueViolation"), grpc.StatusCode.INTERNAL, "INTERNAL"),
    (MemorydError("a bug"), grpc.StatusCode.INTERNAL, "INTERNAL"),
]


class Failing(svc_grpc.MemoryServiceServicer):
    """Answers every Recall with ``error`` as the server's error mapping sends it."""

    error: MemorydError = Internal("unset")

    def Recall(self, request: svc.RecallRequest, context: grpc.ServicerContext) -> svc.RecallResponse:
        context.abort_with_status(to_status(self.error, REQUEST_ID))
        raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def failing() -> Iterator[tuple[Failing, str]]:
    servicer = Failing()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    svc_grpc.add_MemoryServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(None)


def test_every_error_class_of_the_domain_has_a_case():
    assert {type(error) for error, _, _ in CASES} == set(ERROR_CLASSES.values())
    assert {reason for _, _, reason in CASES} <= REASONS


@pytest.mark.parametrize(("error", "code", "reason"), CASES, ids=[type(e).__name__ for e, _, _ in CASES])
def test_each_error_class_reaches_the_caller_with_its_code_and_reason(failing: tuple[Failing, str],
                                                                      error: MemorydError, code: grpc.StatusCode,
                                                                      reason: str):
    servicer, target = failing
    servicer.error = error
    with MemorydClient(target, retry=ONCE) as client, pytest.raises(ClientError) as raised:
        client.recall(subject="alice", keys=["drink"])
    got = raised.value
    assert (got.code, got.reason, got.domain, got.request_id) == (code, reason, "memoryd", REQUEST_ID)
    if code == grpc.StatusCode.INTERNAL:  # never described
        assert got.message == f"internal error (request id {REQUEST_ID})"
    else:
        assert got.message == error.message
    expected_violations = {v.field: v.description for v in getattr(error, "violations", [])}
    assert got.violations == expected_violations


async def test_the_asyncio_client_decodes_errors_the_same_way(failing: tuple[Failing, str]):
    servicer, target = failing
    servicer.error = InvalidArgument(VIOLATION)
    async with AsyncMemorydClient(target, retry=ONCE) as client:
        with pytest.raises(ClientError) as raised:
            await client.recall(subject="alice", keys=["drink"])
    got = raised.value
    assert (got.code, got.reason, got.request_id) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST", REQUEST_ID)
    assert got.violations == {"items[0].text": "is required"}


def _raw_failure(target: str) -> grpc.RpcError:
    with grpc.insecure_channel(target) as channel:
        try:
            svc_grpc.MemoryServiceStub(channel).Recall(svc.RecallRequest(subject="alice"), timeout=10)
        except grpc.RpcError as error:
            return error
    raise AssertionError("the call succeeded")


def test_a_stub_error_decodes_like_the_clients(failing: tuple[Failing, str]):
    servicer, target = failing
    servicer.error = PermissionDenied("this credential is bound to another subject", reason="SUBJECT_NOT_ALLOWED")
    decoded = from_rpc_error(_raw_failure(target))
    assert isinstance(decoded, ClientError) and type(decoded).__name__ == "PermissionDenied"
    assert (decoded.reason, decoded.request_id) == ("SUBJECT_NOT_ALLOWED", REQUEST_ID)


def test_the_cli_prints_every_violation_even_two_of_one_field(failing: tuple[Failing, str],
                                                              capsys: pytest.CaptureFixture[str]):
    servicer, target = failing
    servicer.error = InvalidArgument([FieldViolation("turns[1].turn_id", "must be an identifier"),
                                      FieldViolation("turns[1].turn_id", "must be unique within the request")])
    report_rpc_error(_raw_failure(target), target)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("memoryd: error: INVALID_ARGUMENT: invalid request: turns[1].turn_id")
    assert lines[1:] == ["  turns[1].turn_id: must be an identifier",
                         "  turns[1].turn_id: must be unique within the request"]
