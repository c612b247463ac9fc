"""The proto ↔ domain enum maps (memoryd.server._enums): one per enum of the contract, each
pairing every proto value but ``*_UNSPECIFIED`` with exactly one domain value — so a value
added on one side alone fails here — and no other module of the server, the stores or the CLI
keeps a map of its own."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from memoryd.domain import (
    ERASE_SELECTORS,
    Category,
    ChangeKind,
    Change,
    EraseMode,
    JobState,
    Outcome,
    Resolution,
    Scope,
    SourceKind,
    Stability,
    Status,
)
from memoryd.server._auth import ROLES
from memoryd.server._enums import (
    CATEGORY,
    CHANGE_KIND,
    CONFLICT_RESOLUTION,
    CONSISTENCY,
    ERASE_MODE,
    ERASE_SELECTOR,
    EXTRACTION_JOB_STATE,
    MAPS,
    MEMORY_CHANGE_KIND,
    MEMORY_STATUS,
    SCOPE,
    SOURCE_KIND,
    STABILITY,
    TOKEN_ROLE,
    TURN_MODE,
    WRITE_OUTCOME,
    EnumMap,
)
from memoryd.v1 import error_reason_pb2, memory_pb2, memory_service_pb2, token_admin_service_pb2
from memoryd.v1 import view_admin_service_pb2

ROOT = Path(__file__).resolve().parents[2]
MODULES = (memory_pb2, memory_service_pb2, token_admin_service_pb2, view_admin_service_pb2)
# ErrorReason has no map: a reason travels as its name (tests/server/test_error_reasons.py).
CONTRACT_ENUMS = {e.full_name for m in MODULES for e in m.DESCRIPTOR.enum_types_by_name.values()}

CASES: list[tuple[EnumMap[Any], Any, set[Any]]] = [
    (CATEGORY, memory_pb2.Category, set(Category)),
    (SCOPE, memory_pb2.Scope, set(Scope)),
    (SOURCE_KIND, memory_pb2.SourceKind, set(SourceKind)),
    (STABILITY, memory_pb2.Stability, set(Stability)),
    (MEMORY_STATUS, memory_pb2.MemoryStatus, set(Status)),
    (ERASE_SELECTOR, memory_pb2.EraseSelector, set(ERASE_SELECTORS)),
    (WRITE_OUTCOME, memory_service_pb2.WriteOutcome, set(Outcome)),
    (CHANGE_KIND, memory_service_pb2.ChangeKind, set(Change)),
    (ERASE_MODE, memory_service_pb2.EraseMode, set(EraseMode)),
    (EXTRACTION_JOB_STATE, memory_service_pb2.ExtractionJobState, set(JobState)),
    (CONFLICT_RESOLUTION, memory_service_pb2.ConflictResolution, set(Resolution)),
    (TOKEN_ROLE, token_admin_service_pb2.TokenRole, set(ROLES)),
    (TURN_MODE, memory_service_pb2.TurnMode, {False, True}),  # chunk the turns?
    (CONSISTENCY, memory_service_pb2.Consistency, {False, True}),  # wait for the index?
    (MEMORY_CHANGE_KIND, memory_service_pb2.MemoryChangeKind, set(ChangeKind)),
]


@pytest.mark.parametrize(("enum_map", "proto", "domain_values"), CASES,
                         ids=[proto.DESCRIPTOR.name for _, proto, _ in CASES])
def test_each_map_pairs_the_proto_values_and_the_domain_values_one_to_one(enum_map: EnumMap[Any], proto: Any,
                                                                          domain_values: set[Any]):
    specified = {number for name, number in proto.items() if not name.endswith("_UNSPECIFIED")}
    assert enum_map.proto is proto
    assert set(enum_map.to_domain) == specified, "a proto value without a domain value, or one too many"
    assert set(enum_map.to_proto) == domain_values, "a domain value without a proto value, or one too many"
    assert all(enum_map.to_proto[d] == p for p, d in enum_map.to_domain.items())


def test_every_enum_of_the_contract_has_one_map_and_a_case():
    assert sorted(m.proto.DESCRIPTOR.full_name for m in MAPS) == sorted(CONTRACT_ENUMS)
    assert [id(m) for m, _, _ in CASES] == [id(m) for m in MAPS]


def _enum_value_names() -> set[str]:
    return {v.name for m in MODULES for e in m.DESCRIPTOR.enum_types_by_name.values() for v in e.values}


def _own_maps(path: Path, names: set[str]) -> list[str]:
    """Dict literals of the module with a proto enum value (``pb.CATEGORY_FACT``) as a key or value."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Dict):
            items = [n for n in (*node.keys, *node.values) if n is not None]
            if any(isinstance(n, ast.Attribute) and n.attr in names for n in items):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_module_keeps_an_enum_map_of_its_own():
    names = _enum_value_names()
    assert "CATEGORY_FACT" in names and not any(n.startswith("ERROR_REASON_") for n in names)
    assert error_reason_pb2.ErrorReason.DESCRIPTOR.full_name not in CONTRACT_ENUMS
    own = [where for folder in (ROOT / "server" / "memoryd", ROOT / "storage" / "memoryd")
           for path in sorted(folder.rglob("*.py")) if path.name != "_enums.py" and "__pycache__" not in path.parts
           for where in _own_maps(path, names)]
    assert not own, f"use memoryd.server._enums instead: {own}"
