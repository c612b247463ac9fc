"""Instruments about the process rather than memoryd's work, named as OpenTelemetry's
semantic conventions name them: the process (CPU time, resident and virtual memory, file
descriptors, threads, uptime), each Postgres connection pool, and ``memoryd.build.info``.

Every value is read when a reader collects (a scrape, an OTLP export), from ``/proc/self`` and
``os.times`` — no thread of its own and no dependency. Where ``/proc`` is missing (not Linux) the
memory, descriptor and thread instruments report nothing rather than a guess.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from ._build import build_info

_PROC = Path("/proc/self")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class PoolStatsLike(Protocol):
    """Read-only, as ``memoryd.storage.PoolStats`` (a frozen dataclass) is."""

    @property
    def pool(self) -> str: ...
    @property
    def used(self) -> int: ...
    @property
    def idle(self) -> int: ...
    @property
    def waiting(self) -> int: ...
    @property
    def max(self) -> int: ...


class Pool(Protocol):
    """What a watched pool offers (``memoryd.storage.Postgres``)."""

    def pool_stats(self) -> PoolStatsLike: ...


class ProcessInstruments:
    """Registers the process, pool and build-info instruments on ``meter``."""

    def __init__(self, meter: Meter) -> None:
        self._started = time.monotonic()
        self._pools: list[Pool] = []
        self._lock = threading.Lock()
        info = build_info()
        self._build = {"version": info.version, "python_version": info.python_version, "commit": info.commit}
        meter.create_observable_counter("process.cpu.time", [self._cpu], unit="s",
                                        description="CPU seconds used by this process, by cpu.mode (user, system)")
        meter.create_observable_up_down_counter("process.memory.usage", [self._resident], unit="By",
                                                description="Resident memory of this process")
        meter.create_observable_up_down_counter("process.memory.virtual", [self._virtual], unit="By",
                                                description="Virtual memory of this process")
        meter.create_observable_up_down_counter("process.unix.file_descriptor.count", [self._fds],
                                                unit="{file_descriptor}",
                                                description="File descriptors open in this process")
        meter.create_observable_up_down_counter("process.thread.count", [self._threads], unit="{thread}",
                                                description="Threads of this process (gRPC's and the database "
                                                            "driver's included)")
        meter.create_observable_gauge("process.uptime", [self._uptime], unit="s",
                                      description="Seconds since this process's metrics started")
        meter.create_observable_up_down_counter(
            "db.client.connection.count", [self._connections], unit="{connection}",
            description="Postgres connections by db.client.connection.state (used, idle) and pool")
        meter.create_observable_up_down_counter(
            "db.client.connection.pending_requests", [self._pending], unit="{request}",
            description="Requests waiting for a Postgres connection, by pool")
        meter.create_observable_up_down_counter(
            "db.client.connection.max", [self._max], unit="{connection}",
            description="The most connections a pool may open")
        meter.create_observable_gauge("memoryd.build.info", [self._build_info],
                                      description="Always 1; the labels say which memoryd build, Python and "
                                                  "git commit this process runs")

    def watch(self, pool: Pool) -> None:
        """Report ``pool``'s connections from now on (a pool watched twice counts once)."""
        with self._lock:
            if all(p is not pool for p in self._pools):
                self._pools.append(pool)

    # -- callbacks (the reader's thread) ------------------------------------------------------

    def _cpu(self, _: CallbackOptions) -> list[Observation]:
        times = os.times()
        return [Observation(times.user, {"cpu.mode": "user"}), Observation(times.system, {"cpu.mode": "system"})]

    def _statm(self, field: int) -> list[Observation]:
        try:
            pages = int((_PROC / "statm").read_text().split()[field])
        except (OSError, ValueError, IndexError):
            return []
        return [Observation(pages * _PAGE)]

    def _resident(self, _: CallbackOptions) -> list[Observation]:
        return self._statm(1)

    def _virtual(self, _: CallbackOptions) -> list[Observation]:
        return self._statm(0)

    def _fds(self, _: CallbackOptions) -> list[Observation]:
        try:
            return [Observation(len(os.listdir(_PROC / "fd")))]
        except OSError:
            return []

    def _threads(self, _: CallbackOptions) -> list[Observation]:
        try:
            for line in (_PROC / "status").read_text().splitlines():
                if line.startswith("Threads:"):
                    return [Observation(int(line.split()[1]))]
        except (OSError, ValueError, IndexError):
            pass
        return []

    def _uptime(self, _: CallbackOptions) -> list[Observation]:
        return [Observation(time.monotonic() - self._started)]

    def _each_pool(self, observe: Callable[[PoolStatsLike], Iterable[Observation]]) -> list[Observation]:
        with self._lock:
            pools = list(self._pools)
        return [o for pool in pools for o in observe(pool.pool_stats())]

    def _connections(self, _: CallbackOptions) -> list[Observation]:
        return self._each_pool(lambda s: (
            Observation(s.used, {"db.client.connection.state": "used", "db.client.connection.pool.name": s.pool}),
            Observation(s.idle, {"db.client.connection.state": "idle", "db.client.connection.pool.name": s.pool})))

    def _pending(self, _: CallbackOptions) -> list[Observation]:
        return self._each_pool(lambda s: (Observation(s.waiting, {"db.client.connection.pool.name": s.pool}),))

    def _max(self, _: CallbackOptions) -> list[Observation]:
        return self._each_pool(lambda s: (Observation(s.max, {"db.client.connection.pool.name": s.pool}),))

    def _build_info(self, _: CallbackOptions) -> list[Observation]:
        return [Observation(1, self._build)]
