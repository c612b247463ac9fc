"""What ``memoryd bench watch`` writes and who should see it — the readers' views, the streams,
the writes — and the tally of what arrived. Pure, so the arithmetic is checked by hand
(tests/domain/test_bench_watch.py).

Four reader agents whose views hide different parts of what is written (categories and key
globs), so a quarter to five sixths of the writes are hidden from each stream:

    reader    reads                                      share of one subject's writes
    planner   fact, preference, goal; every key          1
    public    fact, preference, goal; keys public.*      1/2
    facts     fact; every key                            1/3
    narrow    fact; keys public.*                        1/6

Write ``n`` goes to subject ``n // 6 mod subjects`` with category ``n mod 3`` (fact, preference,
goal) and key ``public.w<n>`` for even ``n``, ``private.w<n>`` for odd, so every subject gets every
combination. Stream ``i`` is reader ``i mod 4``; every fifth group of four streams watches all
subjects, the others one subject each, in turn.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from memoryd.v1 import memory_pb2 as pb

from .._metrics import percentile

CATEGORIES = (pb.CATEGORY_FACT, pb.CATEGORY_PREFERENCE, pb.CATEGORY_GOAL)
PUBLIC = "public."
WRITER = "bench-writer"
VISIBLE_FIELDS = tuple(sorted(f.name for f in pb.Memory.DESCRIPTOR.fields if f.name != "content_unavailable"))


@dataclass(frozen=True)
class Reader:
    """A watching agent and what its view reads."""

    agent: str
    categories: tuple[int, ...]
    public_only: bool

    def reads(self, category: int, key: str) -> bool:
        return category in self.categories and (not self.public_only or key.startswith(PUBLIC))

    def view(self) -> pb.View:
        patterns = [PUBLIC + "*"] if self.public_only else ["*"]
        rules = [pb.ViewRule(category=c, key_patterns=patterns) for c in self.categories]  # type: ignore[arg-type]
        return pb.View(agent=self.agent, read_rules=rules, visible_fields=list(VISIBLE_FIELDS),
                       description="memoryd bench watch: a watcher")


READERS = (
    Reader("bench-planner", CATEGORIES, False),
    Reader("bench-facts", (pb.CATEGORY_FACT,), False),
    Reader("bench-public", CATEGORIES, True),
    Reader("bench-narrow", (pb.CATEGORY_FACT,), True),
)


def writer_view() -> pb.View:
    rules = [pb.ViewRule(category=c, key_patterns=["*"]) for c in CATEGORIES]
    return pb.View(agent=WRITER, read_rules=rules, write_rules=rules, visible_fields=list(VISIBLE_FIELDS),
                   description="memoryd bench watch: the writer")


def subjects(count: int) -> tuple[str, ...]:
    return tuple(f"watch-user-{i}" for i in range(count))


@dataclass(frozen=True)
class Write:
    """One memory the run writes; ``measured`` is False for the warm-up writes that show a stream is open."""

    number: int
    subject: str
    category: int
    key: str
    measured: bool = True

    def draft(self, sent_at_ns: int) -> pb.MemoryDraft:
        # The send time rides in a visible field, so a reader in another process can time it too.
        return pb.MemoryDraft(category=self.category, key=self.key,  # type: ignore[arg-type]
                              text=f"Watch bench note {self.number}, sent at {sent_at_ns} ns.")


def planned_write(number: int, names: Sequence[str]) -> Write:
    visibility = PUBLIC if number % 2 == 0 else "private."
    return Write(number, names[(number // 6) % len(names)], CATEGORIES[number % 3], f"{visibility}w{number}")


def warmup_write(number: int, subject: str) -> Write:
    """Seen by every reader of ``subject`` (a fact with a public key); not measured."""
    return Write(number, subject, pb.CATEGORY_FACT, f"{PUBLIC}warm{number}", measured=False)


@dataclass(frozen=True)
class Stream:
    """One Watch: ``subject`` "" means all subjects."""

    index: int
    reader: Reader
    subject: str

    def sees(self, write: Write) -> bool:
        return self.subject in ("", write.subject) and self.reader.reads(write.category, write.key)


def plan_streams(count: int, names: Sequence[str]) -> list[Stream]:
    streams = []
    for i in range(count):
        group = i // len(READERS)
        subject = "" if group % 5 == 4 else names[(group % 5) % len(names)]
        streams.append(Stream(i, READERS[i % len(READERS)], subject))
    return streams


@dataclass
class Tally:
    """Every (write, stream) pair: who should see it, what arrived, and when.

    An arrival is identified by the memory's key. A write a stream should see arrives once
    (delivered, timed from just before its Write call) or it is missing; a second arrival is a
    duplicate; an arrival of a write the stream's view hides is a leak. Warm-up writes are not
    expected (a stream may have opened after them) and not timed, but their duplicates and leaks
    count. A write whose Write call failed is not expected."""

    streams: Sequence[Stream]
    writes: dict[str, Write] = field(default_factory=dict)
    sent_at: dict[str, float] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)
    arrivals: dict[tuple[int, str], float] = field(default_factory=dict)  # (stream, key) -> seconds after sending
    duplicates: int = 0
    leaks: int = 0
    foreign: int = 0  # changes to memories the run did not write
    kinds: Counter[str] = field(default_factory=Counter)
    heartbeats: int = 0
    warmed: set[int] = field(default_factory=set)  # streams that received a change
    _expected: int = 0

    def sent(self, write: Write, at: float) -> None:
        self.writes[write.key] = write
        self.sent_at[write.key] = at
        if write.measured:
            self._expected += self.watchers(write)

    def watchers(self, write: Write) -> int:
        return sum(1 for s in self.streams if s.sees(write))

    def write_failed(self, write: Write) -> None:
        if write.measured and write.key not in self.failed:
            self._expected -= self.watchers(write)
        self.failed.add(write.key)

    def arrived(self, stream: Stream, key: str, kind: str, at: float) -> None:
        self.kinds[kind] += 1
        write = self.writes.get(key)
        if write is None:
            self.foreign += 1
            return
        self.warmed.add(stream.index)
        if not stream.sees(write):
            self.leaks += 1
        elif (stream.index, key) in self.arrivals:
            self.duplicates += 1
        else:
            self.arrivals[(stream.index, key)] = at - self.sent_at[key]

    def latencies(self) -> list[float]:
        """Seconds from just before the Write call to the arrival, per delivered pair."""
        return [seconds for (_, key), seconds in self.arrivals.items()
                if self.writes[key].measured and key not in self.failed]

    def expected(self) -> int:
        return self._expected

    def delivered(self) -> int:
        return len(self.latencies())

    def missing(self) -> int:
        return self.expected() - self.delivered()

    def hidden(self) -> int:
        """(write, stream) pairs on the stream's subject where its view hides the write: the
        chances to leak."""
        return sum(1 for w in self.writes.values() if w.measured for s in self.streams
                   if s.subject in ("", w.subject) and not s.sees(w))

    def latency_ms(self) -> dict[str, float | None]:
        ms = [x * 1000 for x in self.latencies()]
        return {"p50": percentile(ms, 50), "p95": percentile(ms, 95), "p99": percentile(ms, 99),
                "max": max(ms) if ms else None, "mean": math.fsum(ms) / len(ms) if ms else None}
