"""A server's readiness (grpc.health.v1): not ready until its vector index has answered once.

Every server connects to the index and loads each collection it keeps (``IndexSet.targets``)
before it listens. If that fails and the index is a Milvus server (``milvus_uri``), the server
listens all the same but reports NOT_SERVING on service ``""`` and the memoryd services — what
Kubernetes' readiness and startup probes ask — and keeps asking the index, SERVING once every
collection has answered. Before, a replica started while Milvus did not answer took traffic at
once and answered Recall from keywords (degraded) for its first 16 s (issue 39).

The wait is bounded (``index_ready_wait_seconds``): past it the replica reports SERVING anyway
and logs a warning, so a Milvus outage never takes every replica out of service — Recall still
answers from keywords, marked degraded, and writes queue in the outbox. Service ``liveness`` is
SERVING from the moment the server listens: waiting for Milvus is not something a restart cures.
Milvus Lite is part of the process: a server on it is ready once it listens, as before.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from grpc_health.v1 import health, health_pb2

from memoryd.domain import MemorydError
from memoryd.storage import IndexSet

from ._worker import LIVENESS

_log = logging.getLogger("memoryd.server")

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
# Between tries: a ping that fails fast (connection refused, the index's breaker open) is
# tried again this soon; one that hangs takes its own time out (pymilvus's, 5-10 s).
RETRY_SECONDS = 0.5


async def index_answered(indexes: IndexSet, wait: float) -> bool:
    """Ask until every collection has answered; True if they did within ``wait`` seconds."""
    async def until_answered() -> None:
        said = ""
        while True:
            try:
                why = await indexes.unanswered()
            except MemorydError as exc:  # a refusal: the server is up by now, ask again all the same
                why = exc.message
            if not why:
                return
            if why != said:  # once per reason, not every half second
                _log.info("the vector index has not answered yet: %s", why)
                said = why
            await asyncio.sleep(RETRY_SECONDS)

    try:
        await asyncio.wait_for(until_answered(), wait)
    except TimeoutError:
        return False
    return True


class Readiness:
    """The health answers of one server: ``listening`` before it starts, then ``run`` if it
    is not ready yet. ``wait``: how long it waits for the index (0: it is ready at once)."""

    def __init__(self, servicer: health.aio.HealthServicer, services: Iterable[str], wait: float) -> None:
        self._servicer = servicer
        self._names = ("", *services)
        self.wait = wait

    async def listening(self) -> None:
        """Before the server starts: the servicer's own default for ``""`` is SERVING."""
        await self._servicer.set(LIVENESS, SERVING)
        for name in self._names:
            await self._servicer.set(name, NOT_SERVING if self.wait > 0 else SERVING)

    async def run(self, indexes: IndexSet) -> None:
        """Report SERVING once the index has answered, or after ``wait`` seconds whatever it
        does. A stop meanwhile cancels this; a servicer shutting down ignores ``set``."""
        if await index_answered(indexes, self.wait):
            _log.info("ready: the vector index answered")
        else:
            _log.warning("ready without the vector index: it has not answered within %.0fs "
                         "(index_ready_wait_seconds); Recall answers from keywords, marked degraded, until it does",
                         self.wait)
        for name in self._names:
            await self._servicer.set(name, SERVING)
