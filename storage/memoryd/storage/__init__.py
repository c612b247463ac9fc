"""memoryd's storage adapters. Postgres is the source of truth.

Adapters take the tenant explicitly on every call and translate their drivers' errors into
``memoryd.domain``'s error tree. The server reaches them only through its caller scope.
"""

from ._embedded import EmbeddedPostgres
from ._memories import PostgresMemoryStore
from ._migrate import Migration, available, migrate
from ._postgres import APP_ROLE, Postgres, PostgresSettings

__all__ = [
    "APP_ROLE",
    "EmbeddedPostgres",
    "Migration",
    "Postgres",
    "PostgresMemoryStore",
    "PostgresSettings",
    "available",
    "migrate",
]
