"""The memoryd error tree. It imports nothing from gRPC or from any store driver.

::

    MemorydError
    ├── InvalidArgument        bad input; carries field violations
    │   └── ArchiveInvalid      an import archive that cannot be opened or restored
    ├── Unauthenticated        no, malformed, badly signed or expired credential
    ├── PermissionDenied       outside the caller's rights (subject binding, role, view)
    ├── NotFound               nothing the caller may see by that name
    ├── FailedPrecondition     the system is not in a state to do this (e.g. no model)
    │   ├── IdempotencyKeyReused
    │   └── DataKeyUnavailable  a subject's data key is missing or cannot be unwrapped
    ├── ResourceExhausted      size limits and quotas
    ├── NotImplementedYet      a feature this server version does not have
    ├── Unavailable            a store cannot be reached; retryable, nothing was written
    └── Internal               a bug; the message is never shown to the caller

Storage adapters translate their drivers' exceptions into this tree; the server maps it to
gRPC status codes in exactly one place (``memoryd.server.rpc._errors.to_status``). Every error
has a ``reason`` (the ``memoryd.v1.ErrorReason`` name without its prefix; each class's default
fits its status code, a ``reason=`` argument narrows it, and tests/server/test_error_reasons.py
checks every one is in the enum) and a message that is safe to show the caller: it never
names another tenant's or subject's data.

There is no ``AlreadyExists``: no call creates a thing under a name the caller chooses and
fails when it exists. Memory ids are made by the server, a write to an existing key follows
the category's policy, PutView replaces (with ``expected_version`` for a conflict check,
VIEW_VERSION_CONFLICT), a reused idempotency key with another request is
IDEMPOTENCY_KEY_REUSED, and a unique violation in a store is a bug (INTERNAL).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldViolation:
    """One invalid field: ``field`` is a path such as ``items[2].key``."""

    field: str
    description: str


class MemorydError(Exception):
    """Base of every error memoryd raises on purpose."""

    reason: str = "INTERNAL"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if reason is not None:
            self.reason = reason


class InvalidArgument(MemorydError):
    reason = "INVALID_REQUEST"

    def __init__(self, violations: list[FieldViolation] | FieldViolation, message: str = "") -> None:
        if isinstance(violations, FieldViolation):
            violations = [violations]
        self.violations = list(violations)
        summary = "; ".join(f"{v.field}: {v.description}" for v in self.violations[:5])
        if len(self.violations) > 5:
            summary += f"; and {len(self.violations) - 5} more"
        super().__init__(message or f"invalid request: {summary}")


class ArchiveInvalid(InvalidArgument):
    """An import archive is malformed, of an unknown format or version, cannot be opened with
    the passphrase given, or holds a memory that fails validation."""

    reason = "ARCHIVE_INVALID"


class Unauthenticated(MemorydError):
    reason = "TOKEN_INVALID"


class PermissionDenied(MemorydError):
    reason = "VIEW_DENIED"


class NotFound(MemorydError):
    reason = "NOT_FOUND"


class FailedPrecondition(MemorydError):
    reason = "SERVER_MISCONFIGURED"


class IdempotencyKeyReused(FailedPrecondition):
    reason = "IDEMPOTENCY_KEY_REUSED"

    def __init__(self) -> None:
        super().__init__("idempotency_key was already used for a different request")


class DataKeyUnavailable(FailedPrecondition):
    """The subject's data key cannot be unwrapped (wrong or lost tenant key, a damaged key
    row): nothing of that subject can be written or decrypted until the key is restored."""

    reason = "DATA_KEY_UNAVAILABLE"

    def __init__(self, message: str = "the data key of this subject is unavailable") -> None:
        super().__init__(message)


class ResourceExhausted(MemorydError):
    reason = "LIMIT_EXCEEDED"


class NotImplementedYet(MemorydError):
    reason = "NOT_IMPLEMENTED"


class Unavailable(MemorydError):
    reason = "STORE_UNAVAILABLE"


class Internal(MemorydError):
    reason = "INTERNAL"
