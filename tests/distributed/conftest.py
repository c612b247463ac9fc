"""One deployment in the distributed shape per module (tests/support_distributed.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..support import unique
from ..support_distributed import Deployment, ExternalPostgres, MilvusStandalone


@pytest.fixture(scope="session")
def pg15() -> Iterator[ExternalPostgres]:
    server = ExternalPostgres().start()
    yield server
    server.destroy()


@pytest.fixture(scope="session")
def milvus_standalone() -> Iterator[MilvusStandalone]:
    server = MilvusStandalone().start()
    yield server
    server.destroy()


def new_deployment(pg15: ExternalPostgres, milvus: MilvusStandalone, root: Path) -> Deployment:
    """A migrated database (logins with passwords) and an empty keys folder; no process yet."""
    owner_dsn = pg15.create_owner_database(unique("memoryd").replace("-", "_"))
    (root / "keys").mkdir(mode=0o700)
    deployment = Deployment(pg15, milvus, owner_dsn, root / "keys", root)
    done = deployment.migrate()
    assert done.returncode == 0, done.stderr
    return deployment
