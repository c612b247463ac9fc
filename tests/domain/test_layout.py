"""The layout shows the architecture: subpackages with declared boundaries, small folders, small
modules, and no dependency cycle — not even one written only for the type checker.

Read with ``ast`` like test_architecture.py (whose import reader this uses), over the service's
own code: ``memoryd.server``, ``memoryd.storage``, ``memoryd.domain`` and ``memoryd.cli``.

- **Boundaries.** ``SERVER`` and ``STORAGE`` list, for each subpackage (and each private module
  at a package's root, the shared kernel such as ``_config``), what it may import of its
  siblings. Every import counts — at load time, inside a function, or under ``TYPE_CHECKING``:
  a deferred import is still a dependency. The tables are the architecture in one place; a new
  edge is a design decision made here, in review, not in passing.
- **Size.** No package folder holds more than 12 Python modules (``__init__`` included), and no
  module is over 500 lines.
- **Cycles.** The module graph has no cycle even when imports under ``TYPE_CHECKING`` count
  (an annotation that needs another module is a dependency on it). Imports inside a function
  stay out of this one check: they are how a deliberate late reference is written, and the
  boundary tables above still see them.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from pathlib import Path

import pytest

from tests.domain.test_architecture import ROOT, _cycles, _imports, _modules, _under

SERVICE = ("memoryd.server", "memoryd.storage", "memoryd.domain", "memoryd.cli", "memoryd.bench")
MAX_MODULES_PER_FOLDER = 12
MAX_LINES = 500

# memoryd.server, bottom up. The root's private modules are the kernel every part reads.
SERVER: dict[str, set[str]] = {
    "_auth": set(),  # tokens and the Principal they yield
    "_config": set(),  # the frozen configuration
    "_config_load": {"_config"},  # reading it from a file and the environment
    "_enums": {"_auth"},  # proto <-> domain enum maps
    "validation": {"_config", "_enums"},  # requests in, typed commands out
    "telemetry": {"_config"},  # logs, metrics, traces, build info
    "credentials": {"_auth", "_config"},  # secrets, page tokens, mTLS identity, revocations
    "recall": {"_config"},  # ranking: pure scoring and the recaller
    "screen": {"_config"},  # what is never stored: PII, instruction-like text, provenance
    "guard": {"_auth"},  # decides on domain types: no I/O, no protobuf, no validation commands
    "present": {"_enums", "guard"},  # builds answers from what the guard decided
    "views": {"_auth", "credentials", "present", "telemetry", "validation"},  # the view registry and admin
    "ingest": {"_config", "guard", "screen", "views"},  # extraction, chunking, consolidation
    "usecases": {"_auth", "_config", "_enums", "credentials", "guard", "ingest", "present", "recall", "screen",
                 "telemetry", "validation", "views"},
    "rpc": {"_auth", "_config", "credentials", "guard", "telemetry", "usecases", "validation", "views"},
    "app": {"_auth", "_config", "credentials", "ingest", "recall", "rpc", "telemetry", "usecases", "views"},
}

# memoryd.storage, bottom up.
STORAGE: dict[str, set[str]] = {
    "_filters": set(),  # the one filter compiler (SQL and Milvus expressions)
    "_loops": set(),  # how background tasks wait, stop and back off
    "postgres": set(),  # pool, tenant transactions, migrations, audit, counters
    "keys": set(),  # key provider and envelope encryption
    "models": {"postgres"},  # embedders and the HTTP model endpoints, their breaker and slots
    "keywords": {"_filters", "postgres"},  # the keyword channel
    "vectors": {"_filters"},  # Milvus
    "memories": {"_filters", "keys", "keywords", "postgres", "vectors"},  # the rows and the session
    "work": {"_filters", "_loops", "keys", "keywords", "memories", "models", "postgres", "vectors"},  # queues, workers
}

# Edges that break the tables today, each to be removed (the test fails when one is gone).
KNOWN_CROSSINGS: set[str] = set()
KNOWN_TYPED_CYCLES: list[list[str]] = []
KNOWN_LONG: dict[str, int] = {}  # modules over MAX_LINES today, each to be split (fails when one is fixed)


def _part(module: str, root: str) -> str | None:
    """The part of ``root`` that ``module`` belongs to: its subpackage or root module."""
    if not _under(module, root) or module == root:
        return None
    return module[len(root) + 1:].split(".")[0]


def _crossings(root: str, table: Mapping[str, Set[str]]) -> set[str]:
    found = set()
    for module in _modules():
        part = _part(module, root)
        if part is None:
            continue
        for imp in _imports(module):
            for dotted in imp.dotted():
                target = _part(dotted, root)
                if target is None or target == part:
                    continue
                if target not in table.get(part, set()):
                    found.add(f"{root}.{part} -> {root}.{target}")
    return found


@pytest.mark.parametrize(("root", "table"), [("memoryd.server", SERVER), ("memoryd.storage", STORAGE)],
                         ids=["server", "storage"])
def test_every_part_is_in_the_boundary_table(root: str, table: Mapping[str, Set[str]]):
    parts = {_part(m, root) for m in _modules() if _part(m, root)}
    assert parts == set(table)


@pytest.mark.parametrize(("root", "table"), [("memoryd.server", SERVER), ("memoryd.storage", STORAGE)],
                         ids=["server", "storage"])
def test_each_part_imports_only_what_its_row_allows(root: str, table: Mapping[str, Set[str]]):
    found = _crossings(root, table)
    assert {c for c in found if c.startswith(root)} - KNOWN_CROSSINGS == set()
    assert {c for c in KNOWN_CROSSINGS if c.startswith(root)} - found == set(), "fixed: remove it from KNOWN_CROSSINGS"


def test_the_tables_are_layers_without_a_cycle():
    for table in (SERVER, STORAGE):
        assert _cycles(table) == []
        assert all(set(row) <= set(table) for row in table.values())


def test_the_boundary_check_sees_deferred_and_typing_imports():
    # Not vacuous: a table that forbids a real edge is caught, whichever way it is written.
    strict = {**SERVER, "present": {"_enums"}}
    assert "memoryd.server.present -> memoryd.server.guard" in _crossings("memoryd.server", strict)
    typed = [imp for imp in _imports("memoryd.storage.work._erasure_recheck") if imp.deferred]
    assert typed, "work._erasure_recheck has imports only its annotations need"


def _folders() -> dict[Path, list[Path]]:
    folders: dict[Path, list[Path]] = {}
    for module in _modules():
        if module.startswith(SERVICE):
            path = _modules()[module]
            folders.setdefault(path.parent, []).append(path)
    return folders


@pytest.mark.parametrize("folder", sorted(_folders()), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_package_folder_holds_more_than_twelve_modules(folder: Path):
    modules = sorted(p.name for p in _folders()[folder])
    assert len(modules) <= MAX_MODULES_PER_FOLDER, modules


def test_no_module_is_over_500_lines():
    long = {str(p.relative_to(ROOT)): n for ps in _folders().values() for p in ps
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert set(long) - set(KNOWN_LONG) == set()
    assert set(KNOWN_LONG) - set(long) == set(), "split: remove it from KNOWN_LONG"


def _typed_graph() -> dict[str, set[str]]:
    """Module -> modules it imports at load time or under TYPE_CHECKING (not inside functions)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module in modules:
        if not module.startswith(SERVICE):
            continue
        source = modules[module].read_text()
        edges = graph.setdefault(module, set())
        for imp in _imports(module):
            if imp.deferred and not _typing_only(source, imp.line):
                continue
            targets = [f"{imp.base}.{n}" if f"{imp.base}.{n}" in modules else imp.base for n in imp.names] or [imp.base]
            edges.update(t for t in targets if t in modules and t != module)
    return graph


def _typing_only(source: str, line: int) -> bool:
    """Whether the import on ``line`` sits in an ``if TYPE_CHECKING:`` block (not a function)."""
    lines = source.splitlines()
    indent = len(lines[line - 1]) - len(lines[line - 1].lstrip())
    for above in reversed(lines[: line - 1]):
        stripped = above.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        if len(above) - len(stripped) < indent:
            return stripped.startswith("if TYPE_CHECKING")
    return False


def test_no_module_cycle_even_through_typing_imports():
    graph = _typed_graph()
    # Not vacuous: typing-only edges are in the graph.
    assert any(_typing_only(_modules()[m].read_text(), imp.line) for m in graph for imp in _imports(m) if imp.deferred)
    assert _cycles(graph) == KNOWN_TYPED_CYCLES
