"""Storage is reached through its tenant-bound session.

Read with ``ast``, like test_layout.py:

- **Tenant parameters.** The storage functions that still take a ``tenant`` are listed here
  (``TENANT_TAKERS``, at most 30): the tenant transaction's definition, the constructors of
  tenant-bound objects, the key provider port, catalogue and worker-role code. Everything else
  is given the tenant bound to what it works in (a ``TenantConn``, a session, a key ring, an
  index partition). A new one is a design decision made here; one that no longer takes a
  tenant must leave the list (the test fails either way), so the list only shrinks.
- **Use cases.** ``memoryd.server.usecases`` reaches storage only through the call's session
  (``ctx.store``): never the process's stores, job queue, index set or outbox worker through
  ``services``, never a storage function given a tenant.
"""

from __future__ import annotations

import ast
import pytest

from tests.domain.test_architecture import ROOT

pytestmark = pytest.mark.pure

STORAGE = ROOT / "storage" / "memoryd" / "storage"
USECASES = ROOT / "server" / "memoryd" / "server" / "usecases"

# "module:qualified name" of every storage function with a ``tenant`` parameter. Everything
# else gets the tenant bound to what it works in: a tenant transaction's ``TenantConn``, a
# session, a key ring (``TenantKeys``), an index partition (``IndexPartition``).
TENANT_TAKERS: set[str] = {
    # The tenant transaction's definition: where row level security is set for the tenant.
    "postgres/_postgres.py:Postgres.tenant_tx", "postgres/_postgres.py:Postgres._transaction",
    # Constructors of tenant-bound objects, each made once: a session, the session's base, the
    # key ring, a data key, the tenant's term hasher, the index partition and its name.
    "memories/_session.py:Stores.session", "memories/_bound.py:Bound.__init__", "keys/_envelope.py:SubjectKeys.of",
    "keys/_envelope.py:DataKey.__init__", "keywords/_keywords.py:TermHasher.for_tenant",
    "vectors/_milvus.py:MilvusIndex.partition", "vectors/_records.py:partition_name",
    "work/_consolidation.py:Consolidations.session",
    # The key provider port (``memoryd.domain.KeyProvider``, a KMS's shape): the tenant selects
    # the tenant key and is bound into the wrapped key's associated data.
    "keys/_keys.py:LocalKeyProvider.wrap", "keys/_keys.py:LocalKeyProvider.unwrap",
    "keys/_keys.py:LocalKeyProvider._sealing",
    # Catalogue code called by the server's admin and auth paths with a tenant: views,
    # revocations, the token ledger.
    "postgres/_views.py:PostgresViewStore.get", "postgres/_views.py:PostgresViewStore.put",
    "postgres/_views.py:PostgresViewStore.put_first", "postgres/_views.py:PostgresViewStore.delete",
    "postgres/_views.py:PostgresViewStore.list", "postgres/_revocations.py:PostgresRevocations.revoke",
    "postgres/_revocations.py:PostgresRevocations.revoked", "postgres/_revocations.py:PostgresTokenLedger.record_issue",
    # Worker-role code: tenants come from claimed rows of the outbox, the job queue, the
    # lifecycle sweep, re-indexing and the tenant-size census.
    "work/_outbox.py:OutboxWorker._read", "work/_outbox.py:OutboxWorker._retry_later",
    "work/_outbox.py:OutboxWorker._record_routes", "work/_jobs.py:ExtractionJobs.open",
    "work/_jobs.py:ExtractionJobs.release", "work/_jobs.py:ExtractionJobs.fail",
    "work/_lifecycle.py:LifecycleSweeper.sweep_tenant", "work/_reindex.py:_save",
    "work/_tenant_size.py:LargeTenants.size",
}
MAX_TENANT_TAKERS = 30  # issue 42: worker-role and catalogue code, and the bound objects' constructors
# Services a use case must not reach: storage past the session, or what reaches storage itself.
PAST_THE_SESSION = {"store", "jobs", "indexes", "worker"}
STORAGE_FUNCTIONS_WITH_A_TENANT = {"wait_indexed", "erase_vectors", "drop_subject_jobs"}


def _tenant_takers() -> set[str]:
    found: set[str] = set()

    def walk(node: ast.AST, module: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                walk(child, module, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                args = child.args
                if "tenant" in {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}:
                    found.add(f"{module}:{prefix}{child.name}")
                walk(child, module, f"{prefix}{child.name}.")

    for path in sorted(STORAGE.rglob("*.py")):
        walk(ast.parse(path.read_text()), str(path.relative_to(STORAGE)), "")
    return found


def test_only_the_listed_storage_functions_take_a_tenant():
    found = _tenant_takers()
    assert found - TENANT_TAKERS == set(), "a new storage function takes a tenant: make it a session's"
    assert TENANT_TAKERS - found == set(), "it no longer takes a tenant: remove it from TENANT_TAKERS"


def test_at_most_30_storage_functions_take_a_tenant():
    assert len(_tenant_takers()) <= MAX_TENANT_TAKERS


def test_the_session_takes_no_tenant_per_call():
    # Only its construction does (``Bound.__init__``); every method has it bound already.
    session = [name for name in _tenant_takers() if name.startswith(("memories/_session.py:StoreSession",
                                                                     "memories/_reads.py", "memories/_erase.py:Erasing",
                                                                     "memories/_bound.py:Bound"))]
    assert session == ["memories/_bound.py:Bound.__init__"]
    # Not vacuous: the count sees methods of classes.
    assert any(name.startswith("work/_jobs.py:ExtractionJobs.") for name in _tenant_takers())


def _reaches_past_the_session(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in PAST_THE_SESSION:
            owner = node.value
            if (isinstance(owner, ast.Attribute) and owner.attr == "services") or (
                    isinstance(owner, ast.Name) and owner.id == "services"):
                found.append(f"services.{node.attr} (line {node.lineno})")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in STORAGE_FUNCTIONS_WITH_A_TENANT:
                found.append(f"{node.func.id}(...) (line {node.lineno})")
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memoryd.storage"):
            found.extend(f"imports {a.name} (line {node.lineno})" for a in node.names
                         if a.name in STORAGE_FUNCTIONS_WITH_A_TENANT)
    return found


@pytest.mark.parametrize("module", sorted(p.name for p in USECASES.glob("*.py")))
def test_use_cases_reach_storage_only_through_the_session(module: str):
    assert _reaches_past_the_session(ast.parse((USECASES / module).read_text())) == []


def test_the_use_case_check_finds_a_reach_past_the_session():
    # Not vacuous: what use cases wrote before the session owned storage is caught.
    before = ("from memoryd.storage import wait_indexed\n"
              "async def erase(ctx):\n"
              "    await ctx.services.store.erase(ctx.tenant)\n"
              "    await wait_indexed(ctx.services.store, ctx.services.worker, ctx.tenant, [], 1.0)\n"
              "    await ctx.services.jobs.get(ctx.tenant)\n")
    assert len(_reaches_past_the_session(ast.parse(before))) == 6  # services x4, the import, the call
