"""The violation collector every validator of the package fills: one ``Checker`` per request,
reporting every invalid field at once with its path (``items[3].key``).

A Checker made with the request starts with the violations of the contract's annotated rules
(``_schema``, at most one per field); a later rule about a field already refused adds nothing,
so each field is described once, by the rule it broke first, and a client may key the
violations by field (the Python client's ``MemorydError.violations`` is a dict)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format, struct_pb2, timestamp_pb2
from google.protobuf.message import Message

from memoryd.domain import (
    CONTROL_CHARACTERS,
    FieldViolation,
    InvalidArgument,
)

from .._config import Limits
from ._schema import schema_violations


class Checker:
    """Collects violations so one response can name every bad field."""

    def __init__(self, limits: Limits, request: Message | None = None, *, path: str = "") -> None:
        """``request``: the message whose annotated rules are checked first (its fields under ``path``)."""
        self.limits = limits
        self.violations: list[FieldViolation] = []
        self._refused: set[str] = set()
        if request is not None:
            self.rules(request, path)

    def rules(self, message: Message, path: str = "") -> None:
        """Check ``message``'s annotated rules (its fields under ``path``)."""
        found = schema_violations(message, path)
        self.violations.extend(found)
        self._refused.update(v.field for v in found)

    def fail(self, field: str, description: str) -> None:
        if field not in self._refused:  # one description per field: a client may key them by field
            self._refused.add(field)
            self.violations.append(FieldViolation(field, description))

    def done(self) -> None:
        if self.violations:
            raise InvalidArgument(self.violations)

    # Presence, grammars and the contract's fixed sizes are annotated rules (_schema); what is
    # left for free text is a size a server setting gives, and NUL.
    def text(self, field: str, value: str, max_bytes: int) -> str:
        if len(value.encode()) > max_bytes:
            self.fail(field, f"must be at most {max_bytes} bytes")
        elif "\x00" in value:
            self.fail(field, "must not contain NUL characters")
        return value

    # A server may be configured to allow shorter subjects and keys than the contract.
    def subject(self, field: str, value: str) -> str:
        return self.text(field, value, self.limits.max_subject_bytes)

    def key(self, field: str, value: str) -> str:
        return self.text(field, value, self.limits.max_key_bytes)

    def enum(self, field: str, value: int, allowed: Mapping[int, Any], *, required: bool = False,
             default: Any = None) -> Any:
        """The domain value of a proto enum value (``allowed``: an ``EnumMap.to_domain``); 0,
        the unset ``*_UNSPECIFIED``, is ``default`` unless ``required``."""
        if value in allowed:
            return allowed[value]
        if value == 0 and required:
            self.fail(field, "is required")
        elif value == 0:
            return default
        else:
            self.fail(field, f"unknown value {value}")
        return None

    def timestamp(self, message: Message, name: str, field: str) -> datetime | None:
        if not message.HasField(name):
            return None
        stamp: timestamp_pb2.Timestamp = getattr(message, name)
        try:
            if not 0 <= stamp.nanos < 1_000_000_000:
                raise ValueError
            return stamp.ToDatetime(tzinfo=UTC)
        except (ValueError, OverflowError):
            self.fail(field, "is not a valid timestamp")
            return None

    def struct(self, field: str, value: struct_pb2.Struct) -> dict[str, Any] | None:
        try:
            data = json_format.MessageToDict(value)
        except ValueError:  # NaN or infinite numbers have no JSON form
            self.fail(field, "must not contain NaN, infinite numbers or numbers beyond a double's ±1.8e308")
            return None
        except RecursionError:
            self.fail(field, f"must be at most {self.limits.max_data_depth} levels deep")
            return None
        encoded = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        if len(encoded.encode()) > self.limits.max_data_bytes:
            self.fail(field, f"must be at most {self.limits.max_data_bytes} bytes as JSON")
        elif _depth(data) > self.limits.max_data_depth:
            self.fail(field, f"must be at most {self.limits.max_data_depth} levels deep")
        elif "\\u0000" in encoded:
            self.fail(field, "must not contain NUL characters")
        return data

    def tags(self, field: str, values: Any) -> tuple[str, ...]:
        # Tags are free text, but they are labels on one line and filter values compiled into
        # Milvus expressions, which refuse control characters (as INTERNAL, too late): they
        # are refused here, with the field's path (``CONTROL_CHARACTERS``).
        if len(values) > self.limits.max_tags:
            self.fail(field, f"must have at most {self.limits.max_tags} entries")
            return ()
        for i, tag in enumerate(values):
            before = len(self.violations)
            self.text(f"{field}[{i}]", tag, self.limits.max_tag_bytes)
            if len(self.violations) == before and CONTROL_CHARACTERS.search(tag):
                self.fail(f"{field}[{i}]", "must not contain control characters or line breaks")
        return tuple(sorted(set(values)))

    def page_size(self, field: str, value: int) -> int:
        if value < 0 or value > self.limits.max_page_size:
            self.fail(field, f"must be between 0 and {self.limits.max_page_size}")
        return value or self.limits.default_page_size


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0




def uuid_field(check: Checker, field: str, value: str, *, required: bool = False) -> str:
    if not value:
        if required:
            check.fail(field, "is required")
        return value
    try:
        return str(uuid.UUID(value))
    except ValueError:
        check.fail(field, "must be a UUID")
        return value


