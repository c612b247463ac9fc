"""The data directory's lock: which process has its Milvus Lite (and serves its embedded
PostgreSQL).

Milvus Lite is a file one process at a time may open: a second opener fails after ~20 s deep
inside it, with a traceback. So ``memoryd serve`` takes ``<data_dir>/serve.lock`` (an
``flock``, held for the process's life, so a killed holder frees it) whenever it runs an
embedded part, and ``memoryd reindex`` takes the same lock whenever it would open Milvus Lite:
either one, finding the other there, stops at once with one line naming it. The embedded
PostgreSQL itself is shared (every operator command attaches to the one a server runs), so the
commands that only read and write PostgreSQL take no lock and run beside a server.
"""

from __future__ import annotations

import fcntl
import os
from typing import IO, TYPE_CHECKING

from ._errors import CliError

if TYPE_CHECKING:
    from memoryd.server import Config


def hold_data_dir(config: Config, command: str, hint: str) -> IO[str]:
    """Take ``config.data_dir`` for this process (``memoryd COMMAND``), or raise CliError
    naming the process that has it, with ``hint``. The lock lives as long as the returned
    file stays open."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    handle = open(config.data_dir / "serve.lock", "a+")  # noqa: SIM115 (held open on purpose)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        pid, _, holder = handle.read().strip().partition(" ")
        handle.close()
        who = f" (pid {pid})" if pid else ""
        if holder in ("", "serve"):  # an older memoryd wrote its pid alone, and only serve locked
            message = f"another memoryd is already serving {config.data_dir}{who}"
        else:
            message = f"'memoryd {holder}'{who} is using {config.data_dir}"
        raise CliError(message, hint) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()} {command}\n")
    handle.flush()
    return handle
