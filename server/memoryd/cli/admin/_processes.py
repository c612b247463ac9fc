"""``memoryd serve --processes N``: N server processes on one address, for a deployment whose
stores are external (a PostgreSQL server and a Milvus server). A Python gRPC server is one event
loop on one core; this is how one command uses every core of its machine.

The parent opens no store and loads no model. It checks the address as every server does (a
port another memoryd or program holds is refused at once, in one line), holds the port
(``memoryd.server.reserve_shared_port``), then starts N children — ``memoryd serve`` with the
same configuration — that bind it with ``SO_REUSEPORT``: the one place memoryd shares a port on
purpose (``memoryd.server``'s ``_listen``). The kernel spreads new connections over them.

- **Start-up work is done once.** The first child starts alone and does what a first start of
  a deployment does once (its keys, the migrations when it has the owner's login, the
  embedding model's registration and collection, sealing rows written before encryption);
  the others start together once it listens, and find all that done. Each child then runs
  what any server of the deployment runs — the in-process outbox worker (unless
  ``worker_in_process`` is off), the lifecycle sweeper, an extraction worker — and they share
  that work through the database as replicas do (claims under a lease, ``FOR UPDATE SKIP
  LOCKED``).
- **One line when ready.** ``memoryd listening on host:port`` is printed once, after every
  child listens. The children write to the parent's standard output and error.
- **Stopping.** SIGTERM or SIGINT to the parent sends SIGTERM to every child (each drains its
  calls as a server does) and the parent exits 0 once all have stopped. A child that ends on
  its own makes the parent stop the others and exit non-zero: a supervisor restarts the whole
  unit. SIGUSR1 and SIGUSR2 (stack dumps) are passed on to the children.
- **No orphans.** Each child holds one end of a socket pair whose other end only the parent
  holds: when the parent is gone, however it ended (killed too), the child reads the end of
  the stream and stops as on SIGTERM. The children are in a process group of their own, so a
  terminal's Ctrl-C reaches the parent alone, which stops them in order.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memoryd.server import Config

__all__ = ["ParentChannel", "child_command", "serve_processes"]

_log = logging.getLogger("memoryd.serve")
# In a child's environment: the file descriptor of its end of the channel to its parent.
CHANNEL_FD = "MEMORYD_SERVE_CHANNEL_FD"
# How long a child may take to stop beyond its grace period for calls before it is killed.
STOP_MARGIN_SECONDS = 30.0


def child_command(args: argparse.Namespace) -> list[str]:
    """The command line of a child: ``memoryd serve`` with the parent's global options."""
    options = [*(["--config", args.config] if args.config else []), *(["-v"] if args.verbose else [])]
    return [sys.executable, "-m", "memoryd.cli", *options, "serve"]


async def serve_processes(config: Config, command: list[str], on_listening: Callable[[int], None]) -> int:
    """Run ``config.processes`` children of ``command`` on ``config.addr`` until SIGTERM or
    SIGINT (0) or until one of them ends (non-zero); ``on_listening(port)`` once all listen."""
    from memoryd.server import ADDR_SETTING, configure_logging, reserve_shared_port

    configure_logging(config)
    shared = reserve_shared_port(config.addr, ADDR_SETTING)  # a ListenError is the command's error line
    children = _Children(config, shared.addr)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    for signum in (signal.SIGUSR1, signal.SIGUSR2):
        loop.add_signal_handler(signum, children.pass_on, signum)
    try:
        try:
            for numbers in ([1], range(2, config.processes + 1)):
                batch = [await children.start(command, number) for number in numbers]
                failed = await children.until_listening(batch, stop)
                if failed is not None or stop.is_set():
                    return await children.stop(failed)
        finally:
            shared.close()  # the children hold the port now, or are stopping
        on_listening(shared.port)
        return await children.stop(await children.until_one_ends(stop))
    finally:
        await children.stop(None)  # after an error of the parent's own: never leave a child behind


@dataclass
class _Child:
    number: int
    process: asyncio.subprocess.Process
    channel: asyncio.StreamWriter  # the parent's end: open for as long as the parent lives
    said: asyncio.Task[bytes]  # its line once it listens; b"" if it ended first
    exited: asyncio.Task[int]

    def ended(self) -> str:
        code = self.process.returncode
        if code is not None and code < 0:
            return f"was killed by {signal.Signals(-code).name}"
        return f"exited with code {code}"


class _Children:
    def __init__(self, config: Config, addr: str) -> None:
        self._config = config
        self._addr = addr
        self._all: list[_Child] = []
        self._code: int | None = None  # once stopped

    async def start(self, command: list[str], number: int) -> _Child:
        ours, theirs = socket.socketpair()
        env = {**os.environ, "MEMORYD_ADDR": self._addr, "MEMORYD_PROCESSES": "1", CHANNEL_FD: str(theirs.fileno())}
        metrics = self._metrics_addr(number)
        if metrics:
            env["MEMORYD_METRICS_ADDR"] = metrics
        try:
            process = await asyncio.create_subprocess_exec(*command, env=env, stdin=asyncio.subprocess.DEVNULL,
                                                           pass_fds=(theirs.fileno(),), process_group=0)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()  # the child's alone now: the channel ends with the parent
        reader, writer = await asyncio.open_unix_connection(sock=ours)
        child = _Child(number, process, writer, asyncio.create_task(reader.readline()),
                       asyncio.create_task(process.wait()))
        self._all.append(child)
        _log.info("started server process %d of %d (pid %d)", number, self._config.processes, process.pid)
        return child

    def _metrics_addr(self, number: int) -> str:
        """Each child's scrape endpoint: the configured port for the first, the next ones for
        the others (port 0: each its own)."""
        host, _, port = self._config.metrics_addr.rpartition(":")
        if not self._config.metrics_addr or int(port) == 0:
            return self._config.metrics_addr
        return f"{host}:{int(port) + number - 1}"

    async def until_listening(self, batch: list[_Child], stop: asyncio.Event) -> _Child | None:
        """Wait until every child of ``batch`` listens; the child that ended instead, if one
        did (any child), or None when ``stop`` was set first."""
        waiting = list(batch)
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while waiting:
                done, _ = await asyncio.wait({stopping, *(c.said for c in waiting), *(c.exited for c in self._all)},
                                             return_when=asyncio.FIRST_COMPLETED)
                ended = next((child for child in self._all if child.exited in done), None)
                if ended is not None or stopping in done:
                    return ended
                for child in [child for child in waiting if child.said in done]:
                    waiting.remove(child)
                    if not child.said.result():  # its channel closed before it listened: it is ending
                        await child.exited
                        return child
                    _log.info("server process %d of %d (pid %d) is listening", child.number,
                              self._config.processes, child.process.pid)
            return None
        finally:
            stopping.cancel()

    async def until_one_ends(self, stop: asyncio.Event) -> _Child | None:
        """Wait until ``stop`` is set (None) or a child ends (that child)."""
        stopping = asyncio.ensure_future(stop.wait())
        try:
            done, _ = await asyncio.wait({stopping, *(child.exited for child in self._all)},
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        return next((child for child in self._all if child.exited in done), None)

    def pass_on(self, signum: int) -> None:
        for child in self._all:
            if child.process.returncode is None:
                with suppress(ProcessLookupError):
                    child.process.send_signal(signum)

    async def stop(self, failed: _Child | None) -> int:
        """Stop every child (SIGTERM, then SIGKILL past the grace period and a margin); the
        exit code: 0 if stopped as asked and each stopped cleanly, else non-zero."""
        if self._code is None:
            self._code = await self._stop(failed)
        return self._code

    async def _stop(self, failed: _Child | None) -> int:
        if failed is not None:
            _log.error("server process %d of %d (pid %d) %s: stopping the others", failed.number,
                       self._config.processes, failed.process.pid, failed.ended())
        self.pass_on(signal.SIGTERM)
        timeout = self._config.grace_seconds + STOP_MARGIN_SECONDS
        if self._all:
            await asyncio.wait([child.exited for child in self._all], timeout=timeout)
        for child in self._all:
            if not child.exited.done():
                _log.error("server process %d (pid %d) did not stop within %.0f s: killing it", child.number,
                           child.process.pid, timeout)
                with suppress(ProcessLookupError):
                    child.process.kill()
                await child.exited
            elif child is not failed and child.process.returncode != 0:
                _log.error("server process %d (pid %d) %s while stopping", child.number, child.process.pid,
                           child.ended())
            child.said.cancel()
            child.channel.close()
        if failed is not None:
            code = failed.process.returncode
            return code if code is not None and code > 0 else 1
        return 0 if all(child.process.returncode == 0 for child in self._all) else 1


class ParentChannel:
    """A child's end of the channel to the ``serve --processes`` parent that started it."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    @classmethod
    def of_this_process(cls) -> ParentChannel | None:
        """The channel, if a ``serve --processes`` parent started this process; taken out of
        the environment, so nothing this process starts inherits it."""
        fd = os.environ.pop(CHANNEL_FD, "")
        if not fd.isdigit():
            return None
        sock = socket.socket(fileno=int(fd))
        sock.set_inheritable(False)
        sock.setblocking(False)
        return cls(sock)

    def watch(self) -> None:
        """Stop this process as SIGTERM does (calls drain, stores close) once the parent is
        gone: its end of the channel closes however it ended, and this end reads the end of
        the stream. Call it on the running loop, before the server starts."""
        loop = asyncio.get_running_loop()

        def readable() -> None:
            try:
                data = self._sock.recv(64)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:  # the parent never writes: only its end can make this readable
                loop.remove_reader(self._sock.fileno())
                os.kill(os.getpid(), signal.SIGTERM)

        loop.add_reader(self._sock.fileno(), readable)

    def listening(self, port: int) -> None:
        """Tell the parent this child listens (if it is still there to hear it)."""
        with suppress(OSError):
            self._sock.send(f"listening {port}\n".encode())
