"""A call's CPU work and the event loop every tenant's calls share (issue 37).

A server process answers all its tenants on one asyncio event loop: while one call computes,
no other call moves. Work that grows with a request — rows decrypted, memories presented,
drafts sealed, a subject's key names matched against a view's globs — is therefore done in
slices: ``Slices.give_way`` hands the loop back once the current slice has run for
``SLICE_SECONDS`` (1 ms), so the other calls' ready work runs in between and no call holds the
loop much longer than that. A computation that cannot be cut into small items (validating a
Write, tokenizing its texts, encoding an archive, a guard decision that matches keys against
a view's globs) runs on a worker thread instead (``off_loop_if``, ``asyncio.to_thread``): the
GIL still runs one thread at a time, but the loop gets it back every switch interval (5 ms)
rather than when the computation ends.

Before this, the heaviest calls the contract allows held the loop for 0.1-2 s at a time (a
Write of 100 large items the longest), and a view of worst-case globs for as long as its
matching took (bench/RESULTS.md, "The event loop under the heaviest calls").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import ParamSpec, TypeVar

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")

# A neighbour's call waits for I/O some ten times, and each time it is woken it may wait for
# one slice of every call being sliced: with 1 ms slices a call of ten such waits beside a
# second of sliced work took ~30 ms, with 5 ms ~40-150 ms. A give-way costs a few µs.
SLICE_SECONDS = 0.001


class Slices:
    """Cuts a computation on the event loop into slices of about ``seconds`` each."""

    def __init__(self, seconds: float = SLICE_SECONDS) -> None:
        self._seconds = seconds
        self._began = time.perf_counter()

    def due(self) -> bool:
        """Whether this slice has lasted ``seconds`` (a check cheaper than ``give_way``, for
        loops whose steps take well under a microsecond)."""
        return time.perf_counter() - self._began >= self._seconds

    async def give_way(self) -> None:
        """Let the loop run other work if this slice is due; a new one begins when it comes back."""
        if self.due():
            await asyncio.sleep(0)
            self._began = time.perf_counter()


async def sliced(items: Iterable[T], work: Callable[[T], R], seconds: float = SLICE_SECONDS) -> list[R]:
    """``[work(item) for item in items]``, in slices (``Slices``)."""
    slices = Slices(seconds)
    done = []
    for item in items:
        done.append(work(item))
        await slices.give_way()
    return done


async def off_loop_if(heavy: bool, work: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``work(*args, **kwargs)``: on a worker thread when ``heavy`` (``asyncio.to_thread``, which
    carries the call's context variables along), else at once, on the loop."""
    if heavy:
        return await asyncio.to_thread(work, *args, **kwargs)
    return work(*args, **kwargs)
