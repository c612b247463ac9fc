"""The layering, pinned: the guard is the only place that turns stored memories into answers,
handlers reach no store, storage never calls back into the server, the domain imports no
transport or driver."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "server" / "memoryd" / "server"
STORAGE = ROOT / "storage" / "memoryd" / "storage"
DOMAIN = ROOT / "server" / "memoryd" / "domain"
# Response messages that carry a stored memory or what was done to one.
MEMORY_MESSAGES = {"Memory", "ScoredMemory", "MemoryVersion", "PendingValue", "WriteResult", "ExtractionJob",
                   "ErasureReceipt", "StoreCounts"}


def _modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                package = path.parent
                for _ in range(node.level - 1):
                    package = package.parent
                base = ".".join(package.relative_to(path.parents[len(path.relative_to(ROOT).parts) - 1]).parts)
                names.add(f"{base}.{node.module}" if node.module else base)
            else:
                names.add(node.module or "")
    return names


@pytest.mark.parametrize("path", _modules(STORAGE), ids=lambda p: p.name)
def test_storage_never_imports_the_server(path: Path):
    assert not {m for m in _imports(path) if m.startswith("memoryd.server")}


@pytest.mark.parametrize("path", _modules(DOMAIN), ids=lambda p: p.name)
def test_the_domain_imports_no_transport_store_or_driver(path: Path):
    bad = ("grpc", "google.protobuf", "memoryd.v1", "memoryd.storage", "memoryd.server", "psycopg", "pymilvus")
    assert not {m for m in _imports(path) if m.startswith(bad)}


@pytest.mark.parametrize("name", ["_handlers.py", "usecases/__init__.py", "usecases/_write.py", "usecases/_read.py",
                                  "usecases/_change.py", "usecases/_tokens.py"])
def test_handlers_and_use_cases_run_no_sql_and_touch_no_driver(name: str):
    path = SERVER / name
    assert not {m for m in _imports(path) if m.startswith(("psycopg", "pymilvus", "memoryd.storage._"))}
    source = path.read_text()
    assert "SELECT" not in source and "execute(" not in source


def test_the_handlers_module_imports_no_store():
    assert not {m for m in _imports(SERVER / "_handlers.py") if m.startswith("memoryd.storage")}


def _builds_memory_messages(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MEMORY_MESSAGES:
            if isinstance(node.func.value, ast.Name) and node.func.value.id in ("pb", "svc", "memory_pb2",
                                                                               "memory_service_pb2"):
                found.append(f"{path.name}:{node.lineno} {node.func.value.id}.{node.func.attr}(")
    return found


def test_only_the_guard_builds_answers_from_stored_memories():
    outside = [p for p in _modules(SERVER) if "guard" not in p.relative_to(SERVER).parts]
    assert outside, "the server package has modules outside the guard"
    offenders = [hit for path in outside for hit in _builds_memory_messages(path)]
    assert offenders == []
    # ...and the guard does build them (the check above would pass vacuously otherwise).
    assert any(_builds_memory_messages(p) for p in _modules(SERVER / "guard"))


def test_the_guard_decides_without_io():
    for path in _modules(SERVER / "guard"):
        imported = _imports(path)
        assert not {m for m in imported if m.startswith(("memoryd.storage", "psycopg", "pymilvus", "asyncio"))}
        assert "await " not in path.read_text()


def test_every_admin_service_of_the_contract_gets_the_admin_scope():
    """A service added to the contract goes through the chain's caller-scope step like the
    others: MemoryService through the agent's view, every other one as an admin service."""
    from memoryd.server._interceptors import ADMIN_SERVICES

    protos = sorted((ROOT / "protos" / "memoryd" / "v1").glob("*_service.proto"))
    services = {line.split()[1] for p in protos for line in p.read_text().splitlines() if line.startswith("service ")}
    assert "TokenAdminService" in services
    assert {f"/memoryd.v1.{s}/" for s in services - {"MemoryService"}} == set(ADMIN_SERVICES)
