"""A throw-away ``memoryd serve`` for a benchmark run.

Runs ``python -m memoryd.cli serve`` on the embedded default in a temporary data directory,
on a free loopback port (``MEMORYD_ADDR=127.0.0.1:0``), reads the port from the
``memoryd listening on`` line and the demo agent's token from ``<data_dir>/tokens/``, and
stops it (SIGTERM, then SIGKILL) and removes the directory at the end.

Settings that point the server at other stores or keys (the names below, and any
``MEMORYD_*_DSN`` or ``MEMORYD_*_URI``) are not passed on, so the run is self-contained;
other ``MEMORYD_*`` variables (the embedder, pool sizes, tracing) are, so a run can compare
configurations.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from collections.abc import Callable, Iterator
from types import FrameType, TracebackType
from typing import IO

_LISTENING = re.compile(r"memoryd listening on (\S+):(\d+)")
NOT_PASSED_ON = frozenset({
    "MEMORYD_ADDR", "MEMORYD_DATA_DIR", "MEMORYD_CONFIG", "MEMORYD_POSTGRES_DSN", "MEMORYD_POSTGRES_APP_DSN",
    "MEMORYD_SIGNING_KEY_FILE", "MEMORYD_KEY_FILE", "MEMORYD_MILVUS_URI", "MEMORYD_MILVUS_TOKEN", "MEMORYD_TOKEN",
})


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """While inside, SIGTERM unwinds like Ctrl-C, so the embedded servers a benchmark started
    are stopped and their folders removed instead of being left running."""
    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class ServerError(RuntimeError):
    """The embedded server did not start."""


def _passed_on(name: str) -> bool:
    if not name.startswith("MEMORYD_"):
        return True
    return name not in NOT_PASSED_ON and not name.endswith(("_DSN", "_URI"))


def server_environment(base: dict[str, str], data_dir: Path, port: int = 0) -> tuple[dict[str, str], tuple[str, ...]]:
    """The child's environment, and the names of the MEMORYD_* variables passed on to it
    (``port`` 0: the server takes a free one)."""
    env = {k: v for k, v in base.items() if _passed_on(k)}
    passed = tuple(sorted(k for k in env if k.startswith("MEMORYD_")))
    env.update({"MEMORYD_ADDR": f"127.0.0.1:{port}", "MEMORYD_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"})
    # A run must not lose turns to the episodic cap or to staleness while it is measured.
    env.setdefault("MEMORYD_LIFECYCLE_INTERVAL_SECONDS", "0")
    return env, passed


class EmbeddedServer:
    """``with EmbeddedServer() as server:`` → ``server.target``, ``server.token``."""

    def __init__(self, *, start_timeout: float = 180.0, stop_timeout: float = 30.0,
                 environment: dict[str, str] | None = None,
                 on_output: Callable[[str], None] | None = None, port: int = 0,
                 config_file: Path | None = None) -> None:
        self.start_timeout = start_timeout
        # A memoryd TOML file for this server (sections such as [watch] have no environment
        # variables); MEMORYD_CONFIG itself is not passed on from the environment.
        self.config_file = config_file
        self.port = port  # on 127.0.0.1; 0: a free one, read from the server's "listening on" line
        # Settings for this server only (e.g. the embedder), over the inherited MEMORYD_* ones.
        self.environment = dict(environment or {})
        # Sees every line the server prints on stdout (e.g. its spans with the console exporter),
        # on the thread that drains the pipe.
        self.on_output = on_output
        self.stop_timeout = stop_timeout
        self.target = ""
        self.token = ""
        self.passed_on: tuple[str, ...] = ()
        self.exit_code: int | None = None
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    @property
    def data_dir(self) -> Path:
        assert self._folder is not None
        return Path(self._folder.name) / "data"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def log_path(self) -> Path:
        assert self._folder is not None
        return Path(self._folder.name) / "server.log"

    @property
    def signing_key_path(self) -> Path:
        """The server's signing key (the default place under its data directory)."""
        assert self._folder is not None
        return Path(self._folder.name) / "data" / "keys" / "signing.pem"

    def __enter__(self) -> EmbeddedServer:
        self._folder = tempfile.TemporaryDirectory(prefix="memoryd-bench-")
        try:
            self._start(Path(self._folder.name))
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def _start(self, folder: Path) -> None:
        data_dir = folder / "data"
        env, self.passed_on = server_environment({**os.environ, **self.environment}, data_dir, self.port)
        if self.config_file is not None:
            env["MEMORYD_CONFIG"] = str(self.config_file.resolve())
        with self.log_path.open("a") as log:  # the child keeps its own copy of the descriptor
            self._process = subprocess.Popen([sys.executable, "-m", "memoryd.cli", "serve"], env=env, cwd=folder,
                                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, text=True)
        listening = threading.Event()
        port: list[str] = []

        def read(stream: IO[str]) -> None:
            # Drains stdout for the whole life of the process, so the pipe never fills up.
            for line in stream:
                match = _LISTENING.search(line)
                if match and not listening.is_set():
                    port.append(match.group(2))
                    listening.set()
                elif self.on_output is not None:
                    self.on_output(line)

        assert self._process.stdout is not None
        self._reader = threading.Thread(target=read, args=(self._process.stdout,), daemon=True)
        self._reader.start()
        deadline = time.monotonic() + self.start_timeout
        while not listening.wait(0.2):
            if self._process.poll() is not None or time.monotonic() > deadline:
                code = self._process.poll()
                why = (f"exited with code {code}" if code is not None
                       else f"not listening after {self.start_timeout:.0f} s")
                raise ServerError(f"the embedded memoryd server did not start ({why}); its log ends with:\n"
                                  + self._log_tail())
        self.target = f"127.0.0.1:{port[0]}"
        token_file = data_dir / "tokens" / "demo-agent.token"
        try:
            self.token = token_file.read_text().strip()
        except OSError as exc:
            raise ServerError(f"the embedded server wrote no demo token ({token_file}): {exc}") from None

    def _log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def close(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                self.exit_code = process.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                self.exit_code = process.wait()
            if self._reader is not None:
                self._reader.join(5)
            if process.stdout is not None:
                process.stdout.close()
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None
