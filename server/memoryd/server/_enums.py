"""The proto ↔ domain enum maps, one two-way map per enum of the contract.

Validation reads requests with ``to_domain``, the guard's presenter and the archive format
write with ``to_proto``, the CLI builds requests with them. A pair is made by name —
``CATEGORY_FACT`` ↔ ``Category.FACT``, ``ERASE_SELECTOR_SOURCE_TURN`` ↔ ``"source_turn"`` —
so a domain member without its proto value fails at import, and
tests/server/test_enum_maps.py fails when the proto gains a value the domain lacks.

``*_UNSPECIFIED`` is in no map: what an unset field means (a default, or "is required") is the
validator's decision, made where the field is read. ``TurnMode`` and ``Consistency`` have no
domain enum: they map to the flag the server acts on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar, cast

from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

from memoryd.domain import (
    ERASE_SELECTORS,
    Category,
    Change,
    ChangeKind,
    EraseMode,
    JobState,
    Outcome,
    Resolution,
    Scope,
    SourceKind,
    Stability,
    Status,
)
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import token_admin_service_pb2 as tokens

from ._auth import ROLES

D = TypeVar("D")
# A generated enum class: protoc's stubs type each enum field with it (an int subclass whose
# metaclass, EnumTypeWrapper, gives it DESCRIPTOR, Name and Value).
P = TypeVar("P", bound=int)

__all__ = [
    "CATEGORY", "CHANGE_KIND", "CONFLICT_RESOLUTION", "CONSISTENCY", "ERASE_MODE", "ERASE_SELECTOR",
    "EXTRACTION_JOB_STATE", "MAPS", "MEMORY_CHANGE_KIND", "MEMORY_STATUS", "SCOPE", "SOURCE_KIND", "STABILITY",
    "TOKEN_ROLE", "TURN_MODE", "WRITE_OUTCOME", "EnumMap",
]


class EnumMap(Generic[P, D]):
    """The values of one proto enum (``proto``, the generated class) and their domain twins."""

    def __init__(self, proto: type[P], pairs: Mapping[P, D]) -> None:
        self.proto = proto
        self.wrapper = cast(EnumTypeWrapper, proto)  # its metaclass: the descriptor, names and numbers
        self.to_domain: Mapping[int, D] = MappingProxyType({int(p): d for p, d in pairs.items()})
        self.to_proto: Mapping[D, P] = MappingProxyType({d: p for p, d in pairs.items()})
        if len(self.to_proto) != len(self.to_domain):
            raise ValueError(f"{self.wrapper.DESCRIPTOR.full_name}: two values map to one domain value")

    def __repr__(self) -> str:
        return f"EnumMap({self.wrapper.DESCRIPTOR.full_name})"


def _by_name(proto: type[P], prefix: str, members: Iterable[D],
             name: Callable[[Any], str] = lambda m: m.name) -> EnumMap[P, D]:
    wrapper = cast(EnumTypeWrapper, proto)
    return EnumMap(proto, {cast(P, wrapper.Value(prefix + name(m))): m for m in members})


CATEGORY = _by_name(pb.Category, "CATEGORY_", Category)
SCOPE = _by_name(pb.Scope, "SCOPE_", Scope)
SOURCE_KIND = _by_name(pb.SourceKind, "SOURCE_KIND_", SourceKind)
STABILITY = _by_name(pb.Stability, "STABILITY_", Stability)
MEMORY_STATUS = _by_name(pb.MemoryStatus, "MEMORY_STATUS_", Status)
ERASE_SELECTOR = _by_name(pb.EraseSelector, "ERASE_SELECTOR_", ERASE_SELECTORS, str.upper)
WRITE_OUTCOME = _by_name(svc.WriteOutcome, "WRITE_OUTCOME_", Outcome)
CHANGE_KIND = _by_name(svc.ChangeKind, "CHANGE_KIND_", Change)
MEMORY_CHANGE_KIND = _by_name(svc.MemoryChangeKind, "MEMORY_CHANGE_KIND_", ChangeKind)
ERASE_MODE = _by_name(svc.EraseMode, "ERASE_MODE_", EraseMode)
EXTRACTION_JOB_STATE = _by_name(svc.ExtractionJobState, "EXTRACTION_JOB_STATE_", JobState)
CONFLICT_RESOLUTION = _by_name(svc.ConflictResolution, "CONFLICT_RESOLUTION_", Resolution)
TOKEN_ROLE = _by_name(tokens.TokenRole, "TOKEN_ROLE_", sorted(ROLES), str.upper)
# The flags: store the turns as chunks (else extract memories from them); wait for the index.
TURN_MODE = EnumMap(svc.TurnMode, {svc.TURN_MODE_EXTRACT: False, svc.TURN_MODE_CHUNK: True})
CONSISTENCY = EnumMap(svc.Consistency, {svc.CONSISTENCY_INDEX_ASYNC: False, svc.CONSISTENCY_WAIT_INDEXED: True})

MAPS: tuple[EnumMap[Any, Any], ...] = (
    CATEGORY, SCOPE, SOURCE_KIND, STABILITY, MEMORY_STATUS, ERASE_SELECTOR, WRITE_OUTCOME, CHANGE_KIND, ERASE_MODE,
    EXTRACTION_JOB_STATE, CONFLICT_RESOLUTION, TOKEN_ROLE, TURN_MODE, CONSISTENCY, MEMORY_CHANGE_KIND,
)
