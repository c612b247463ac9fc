"""How the CLI reports a failure: one line ``memoryd: error: …`` on stderr, then, where a
likely fix is known, one line ``hint: …``."""

from __future__ import annotations

import sys
from typing import Any

import grpc
from google.rpc import error_details_pb2

from memoryd.client import MemorydError, from_rpc_error
from memoryd.client.cli import TOKEN_HINT


class CliError(Exception):
    """A failure the user can act on: a one-line message and, if known, a hint."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def report(message: str, hint: str = "") -> None:
    print(f"memoryd: error: {_one_line(message)}", file=sys.stderr)
    if hint:
        print(f"hint: {hint}", file=sys.stderr)


def report_rpc_error(error: grpc.RpcError, addr: str = "", *, denied_hint: str = "") -> None:
    """A failed call made with a raw stub (the health check): as ``report_failure``."""
    report_failure(from_rpc_error(error), addr, denied_hint=denied_hint)


def report_failure(failure: MemorydError, addr: str = "", *, denied_hint: str = "") -> None:
    """A failed call: its code and message on one line, a hint for the usual causes (or
    ``denied_hint`` for PERMISSION_DENIED), then the request's field violations (BadRequest
    details) indented, one per line."""
    code, details = failure.code, failure.message
    hint = ""
    if code == grpc.StatusCode.UNAVAILABLE:
        where = f" at {addr}" if addr else ""
        details = f"no memoryd answering{where} ({details})"
        hint = ("start one with `memoryd serve`, or point --addr / MEMORYD_ADDR at a running server; a TLS server "
                "needs --tls-ca (and --tls-cert/--tls-key when it requires client certificates)")
    elif code == grpc.StatusCode.UNAUTHENTICATED:
        hint = TOKEN_HINT + " (tokens expire; the server must hold the key that signed it)"
    elif code == grpc.StatusCode.PERMISSION_DENIED:
        hint = denied_hint or "the caller's view does not allow this; an admin can change it with `memoryd views apply`"
    elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
        hint = "the server is slow or overloaded; `memoryd health --addr ADDR` checks it answers"
    report(f"{code.name}: {details}", hint)
    # From the decoded BadRequest rather than ``failure.violations``: a field may fail two rules.
    for bad in (d for d in failure.details if isinstance(d, error_details_pb2.BadRequest)):
        for violation in bad.field_violations:
            print(f"  {violation.field}: {_one_line(violation.description)}", file=sys.stderr)


def hint_for(exc: BaseException) -> str:
    """A hint for a ValueError/OSError escaping a command: its own, if it knows the fix
    (memoryd.server's ListenError names the setting), else one for the usual causes."""
    own = getattr(exc, "hint", "")
    if isinstance(own, str) and own:
        return own
    text = str(exc)
    if isinstance(exc, FileNotFoundError):
        return "check the path; relative paths are resolved from the current directory"
    if isinstance(exc, PermissionError):
        return "the file is not readable by this user (key files must belong to the user running memoryd)"
    if "MEMORYD_" in text or "configuration" in text:
        return "see docs/configuration.md, or deploy/memoryd.example.toml"
    if "connection" in text.lower() and ("postgres" in text.lower() or "dsn" in text.lower()):
        return "check MEMORYD_POSTGRES_DSN and that PostgreSQL is reachable"
    return ""


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())
