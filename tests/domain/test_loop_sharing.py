"""A call's CPU work shares the event loop (issue 37): long work is cut into slices that give the
loop back, or runs on a worker thread. Timings: bench/RESULTS.md ("The event loop under the
heaviest calls"); the checks here count, they do not time."""

from __future__ import annotations

import asyncio
import random
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from memoryd.domain import Category, Slices, View, ViewRule, off_loop_if, sliced
from memoryd.storage.keywords._keywords import _stem, tokenize
from memoryd.storage.memories._labels import _Subject


class Ticker:
    """Another task on the loop, counting how often it got to run."""

    def __init__(self) -> None:
        self.ticks = 0
        self._stop = False

    async def run(self) -> None:
        while not self._stop:
            self.ticks += 1
            await asyncio.sleep(0)

    def stop(self) -> None:
        self._stop = True


async def ticking(ticker: Ticker) -> asyncio.Task[None]:
    task = asyncio.create_task(ticker.run())
    await asyncio.sleep(0)  # it has started
    return task


async def test_sliced_work_gives_the_loop_back_once_a_slice_is_due():
    ticker = Ticker()
    task = await ticking(ticker)
    before = ticker.ticks
    assert await sliced(range(5), lambda i: i * 2, seconds=0) == [0, 2, 4, 6, 8]  # every item is a slice
    given = ticker.ticks - before
    before = ticker.ticks
    assert await sliced(range(5), lambda i: i * 2, seconds=3600) == [0, 2, 4, 6, 8]  # one slice
    ticker.stop()
    await task
    assert given == 5
    assert ticker.ticks == before


async def test_matching_a_subjects_key_names_against_globs_gives_the_loop_back():
    """A view may hold 2,048 globs and a subject any number of keys: the labelling of a read
    filter matches them in slices, not in one stretch that holds every other call."""
    names = {bytes([i]): f"billing_{i}" if i % 2 else f"home_{i}" for i in range(40)}
    subject = _Subject(names)
    ticker = Ticker()
    task = await ticking(ticker)
    before = ticker.ticks
    await subject.match(["billing_*", "*_1*", "home_3"], Slices(seconds=0))
    given = ticker.ticks - before
    ticker.stop()
    await task
    assert given == 3 * 40  # once after each name, for each pattern
    assert subject.matches == {
        "billing_*": frozenset(label.hex() for label, name in names.items() if name.startswith("billing_")),
        "*_1*": frozenset(label.hex() for label, name in names.items() if name.split("_")[1].startswith("1")),
        "home_3": frozenset(),  # no such name (odd numbers are billing_): no glob, matched exactly
    }


async def test_heavy_work_runs_on_a_worker_thread_and_light_work_at_once():
    loop_thread = threading.get_ident()
    assert await off_loop_if(True, threading.get_ident) != loop_thread
    assert await off_loop_if(False, threading.get_ident) == loop_thread


@pytest.mark.parametrize(("patterns", "has_globs"), [
    pytest.param(("*",), False, id="everything"),
    pytest.param(("home", "work"), False, id="exact-keys"),
    pytest.param(("home", "billing_*"), True, id="a-glob"),
    pytest.param(("**",), True, id="stars-only"),
])
def test_a_view_says_whether_deciding_on_a_key_matches_globs(patterns, has_globs):
    view = View("agent", (ViewRule(Category.FACT),), (ViewRule(Category.PREFERENCE, patterns),), False, frozenset())
    assert view.has_globs is has_globs
    assert View.full("agent").has_globs is False


@pytest.fixture
def switching_often() -> Iterator[None]:
    """Threads switch every microsecond, so a word stemmed by two threads at once is likely."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    _stem.cache_clear()
    yield
    sys.setswitchinterval(interval)
    _stem.cache_clear()


def test_texts_tokenized_on_several_threads_at_once_get_their_own_stems(switching_often):
    """Writes tokenize on worker threads, and the Snowball stemmer keeps its state in itself."""
    rng = random.Random(37)
    words = ["".join(rng.choices("abcdefghiklmnoprstu", k=rng.randint(4, 9))) + rng.choice(("s", "ing", "ed", "ness"))
             for _ in range(4000)]
    texts = [" ".join(words[i::16]) for i in range(16)]  # every word new to the stem cache
    alone = [tokenize(text) for text in texts]
    _stem.cache_clear()
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(tokenize, texts))
    assert together == alone
