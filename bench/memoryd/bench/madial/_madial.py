"""MADial-Bench's memory recall through the Recall RPC: a running conversation, not a clean
question, in Chinese and English and across them.

Protocol (the authors' task, ``shared/datasets/madial-bench/README.md``): for each language and
MADial user, one subject ``<prefix>-<lang>-<user>`` holds that user's memories, each written as one
EVENT with the text ``"[<time>] <event>"``, in one Write per subject (chunks of at most the
server's items per Write) with CONSISTENCY_WAIT_INDEXED. A server merges exact repeats, so a
recalled memory stands for every MADial id written as its text (zh has one such pair and one
triple). Each dialogue is then asked once, one call at a time, of the subject of its user in the
memory language of its mode:

- modes: ``zh`` and ``en`` (a dialogue → memories in its language, 160 each), ``zh-en`` and
  ``en-zh`` (a dialogue → the other language's memories; the 152 dialogues whose gold ids agree in
  both languages and all have an English version);
- shapes: ``query`` — the lines before the first test turn joined as they are (the authors' query)
  sent as ``RecallRequest.query``; ``context`` — the same lines as ``RecallRequest.context`` turns
  (speaker the name, or ``assistant``; one minute apart, the last now), no query.

recall@k = |top k ∩ gold| / |gold| averaged over the dialogues, as the authors' script computes
it; hit@k: the share of dialogues with a gold memory in the top k. Reference latency, on the same
server: short sentences asked of the same subjects, and LoCoMo's questions when a LoCoMo file is
given (the issue's target: MADial's long queries at most 1.5× LoCoMo's Recall p50).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import grpc

from memoryd.client import NO_RETRY, TLS, MemorydClient, MemorydError
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from ._bilingual import Returned, read_set
from .._locomo import BenchError, LocomoOptions, ensure_empty, rpc_failure, run_locomo, server_for, timestamp
from ._madial_data import (
    ASSISTANT,
    LANGUAGES,
    Dialogue,
    Memory,
    Said,
    load_dialogues,
    load_memories,
    shared_gold,
)
from .._metrics import percentile, recall_at_k
from memoryd.cli import Progress

# Conversations that ask for no memory (written for memoryd, issue 40): each is asked of every
# subject; the right answer is an empty one.
SMALL_TALK = Path(__file__).resolve().parents[4] / "bench" / "madial" / "small_talk.json"
MODES = ("zh", "en", "zh-en", "en-zh")  # the dialogue's language → the memories' language
SHAPES = ("query", "context")
KS = (1, 3, 5, 10)
HIT_AT = 5
# The server's defaults (memoryd.server.Limits, not imported: building the benchmarks' parser
# must not load the server; tests/domain/test_bench_madial.py checks they agree).
MAX_QUERY_BYTES = 2000
MAX_ITEMS = 100


def languages(mode: str) -> tuple[str, str]:
    """``"zh-en"`` → ("zh", "en"): the dialogue's language, the memories'."""
    dialogue, _, memories = mode.partition("-")
    return dialogue, memories or dialogue


@dataclass(frozen=True)
class MadialOptions:
    folder: Path
    addr: str | None = None  # None: start an embedded server
    tls: TLS | None = None
    token: str = ""
    modes: tuple[str, ...] = MODES
    shapes: tuple[str, ...] = SHAPES
    k: int = 10
    min_relevance: float | None = None  # None: the server's default
    limit: int = 0  # > 0: the first N dialogues of each mode
    spread: bool = False  # with limit: N dialogues spread evenly over each mode instead
    reference_questions: int = 0  # > 0: that many short sentences per mode, for the reference latency
    locomo: Path | None = None  # also LoCoMo's first conversation, for the reference latency
    subject_prefix: str = "madial"
    timeout: float = 60.0
    start_timeout: float = 180.0

    def check(self) -> None:
        if not self.modes or set(self.modes) - set(MODES):
            raise BenchError(f"modes are among {', '.join(MODES)}")
        if not self.shapes or set(self.shapes) - set(SHAPES):
            raise BenchError(f"shapes are among {', '.join(SHAPES)}")
        if not 1 <= self.k <= 100:
            raise BenchError("k must be between 1 and 100")
        if self.min_relevance is not None and not 0 <= self.min_relevance <= 1:
            raise BenchError("the minimum relevance must be between 0 and 1")
        if self.limit < 0 or self.reference_questions < 0:
            raise BenchError("--limit and --reference-questions must not be negative")
        if self.addr is not None and not self.token:
            raise BenchError("--addr needs a token: --token, $MEMORYD_TOKEN or --token-file")


@dataclass(frozen=True)
class MadialSet:
    memories: dict[str, dict[int, Memory]]  # language → id → memory
    dialogues: dict[str, list[Dialogue]]  # language → dialogues
    cross: tuple[int, ...]  # the dialogues asked across languages

    def asked(self, mode: str, limit: int = 0, spread: bool = False) -> list[Dialogue]:
        """The dialogues of ``mode``; if ``limit`` > 0, the first ``limit`` of them, or (``spread``)
        ``limit`` of them spread evenly over the file: its dialogues come in blocks of a kind (the
        first 40 zh score R@5 0.23, the last 40 0.73), so a spread sample is closer to the whole."""
        spoken, stored = languages(mode)
        chosen = [d for d in self.dialogues[spoken] if spoken == stored or d.index in self.cross]
        if limit <= 0 or limit >= len(chosen):
            return chosen
        return [chosen[i * len(chosen) // limit] for i in range(limit)] if spread else chosen[:limit]


def load_set(folder: Path) -> MadialSet:
    dialogues = {language: load_dialogues(folder, language) for language in LANGUAGES}
    return MadialSet({language: load_memories(folder, language) for language in LANGUAGES}, dialogues,
                     shared_gold(dialogues["zh"], dialogues["en"]))


def fit_query(text: str, limit: int = MAX_QUERY_BYTES) -> tuple[str, bool]:
    """``text`` if it fits ``limit`` bytes; else its last lines that fit, cut at a line start (or,
    if even the last line is longer, its last ``limit`` bytes), and True."""
    if len(text.encode()) <= limit:
        return text, False
    kept: list[str] = []
    size = 0
    for line in reversed(text.splitlines(keepends=True)):
        size += len(line.encode())
        if size > limit:
            break
        kept.append(line)
    if kept:
        return "".join(reversed(kept)), True
    return text.encode()[-limit:].decode(errors="ignore"), True


def context_turns(said: Sequence[Said], now: datetime) -> list[pb.Turn]:
    """The turns as ``RecallRequest.context``: one minute apart, the last at ``now``."""
    return [pb.Turn(turn_id=f"t{i + 1}", speaker="assistant" if s.speaker == ASSISTANT else s.speaker, text=s.text,
                    time=timestamp(now - timedelta(minutes=len(said) - 1 - i)))
            for i, s in enumerate(said)]


@dataclass(frozen=True)
class SmallTalk:
    language: str
    said: tuple[Said, ...]


def load_small_talk(path: Path = SMALL_TALK) -> list[SmallTalk]:
    doc = read_set(path, "small-talk")
    return [SmallTalk(c["lang"], tuple(Said(ASSISTANT if speaker == "assistant" else speaker, text)
                                       for speaker, text in c["turns"])) for c in doc["conversations"]]


@dataclass(frozen=True)
class Chatted:
    """One small-talk conversation asked of one subject: what came back."""
    language: str  # the conversation's
    stored: str  # the memories'
    returned: int
    top_relevance: float | None


def ignores_context(error: MemorydError) -> bool:
    """A server that does not know ``RecallRequest.context`` drops the field and then finds no
    query: INVALID_ARGUMENT naming ``query`` alone. (A refused turn names ``context[i]...``.)"""
    return error.code == grpc.StatusCode.INVALID_ARGUMENT and set(error.violations) == {"query"}


@dataclass(frozen=True)
class Asked:
    mode: str
    shape: str
    dialogue: int
    user: int
    relevant: tuple[str, ...]
    ranking: tuple[tuple[str, ...], ...]  # per returned memory, the MADial ids it stands for
    returned: tuple[Returned, ...]  # the same memories with their signals (id: those ids joined by +)
    latency_ms: float
    sent_bytes: int  # the query's bytes, or the context turns' texts'
    cut: bool = False  # the query was longer than the server takes and was cut
    # The dialogue's first call of the run. A repeat (the same dialogue in another mode or shape)
    # may find what the server embeds in its query-embedding cache (an LRU), which a live
    # conversation, new text every turn, does not: latency counts first calls only.
    first: bool = True
    degraded: str | None = None  # the server's reason, when it answered with less than it should

    def recall(self, k: int) -> float:
        return recall_at_k(self.ranking, self.relevant, k)


@dataclass(frozen=True)
class Row:
    mode: str
    dialogues: int
    recall: dict[int, float]
    hit: float
    empty: int
    p50: float | None
    p99: float | None


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


@dataclass
class MadialResult:
    options: MadialOptions
    asked: list[Asked] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # shape → why the server did not take it
    reference: dict[str, dict[str, Any]] = field(default_factory=dict)  # name → what, calls, latency
    server: dict[str, Any] = field(default_factory=dict)
    longest_query_bytes: int = 0
    seconds: float = 0.0
    small_talk: list[Chatted] = field(default_factory=list)

    @property
    def ks(self) -> tuple[int, ...]:
        return tuple(k for k in KS if k <= self.options.k)

    @property
    def hit_at(self) -> int:
        return min(HIT_AT, self.options.k)

    def rows(self, shape: str) -> list[Row]:
        out = []
        for mode in self.options.modes:
            asked = [a for a in self.asked if a.shape == shape and a.mode == mode]
            if asked:
                latency = [a.latency_ms for a in asked if a.first]
                out.append(Row(mode, len(asked), {k: _mean([a.recall(k) for a in asked]) for k in self.ks},
                               _mean([float(a.recall(self.hit_at) > 0) for a in asked]),
                               sum(not a.returned for a in asked), percentile(latency, 50), percentile(latency, 99)))
        return out

    def latency(self, shape: str) -> dict[str, float | None]:
        """Over the shape's first calls (see ``Asked.first``)."""
        values = [a.latency_ms for a in self.asked if a.shape == shape and a.first]
        return {"p50": percentile(values, 50), "p99": percentile(values, 99), "calls": len(values)}

    @property
    def cut(self) -> int:
        return sum(a.cut for a in self.asked)


class _Run:
    """One run's calls: the client (no retries: a failure is reported, not hidden), the subjects."""

    def __init__(self, client: MemorydClient, target: str, options: MadialOptions, data: MadialSet) -> None:
        self.client, self.target, self.options, self.data = client, target, options, data
        self.ids: dict[str, dict[str, tuple[str, ...]]] = {}  # subject → memory id → MADial ids

    def subject(self, language: str, user: int) -> str:
        return f"{self.options.subject_prefix}-{language}-{user}"

    def write(self, language: str, progress: Progress) -> None:
        by_user: dict[int, list[Memory]] = {}
        for memory in self.data.memories[language].values():
            by_user.setdefault(memory.user, []).append(memory)
        for user, memories in sorted(by_user.items()):
            subject = self.subject(language, user)
            ensure_empty(self.client, subject, self.target, self.options.timeout)
            by_memory: dict[str, list[str]] = {}
            for start in range(0, len(memories), MAX_ITEMS):
                chunk = memories[start:start + MAX_ITEMS]
                request = svc.WriteRequest(subject=subject, consistency=svc.CONSISTENCY_WAIT_INDEXED, items=[
                    pb.MemoryDraft(category=pb.CATEGORY_EVENT, text=m.text) for m in chunk])
                try:
                    response = self.client.write(request, timeout=self.options.timeout)
                except MemorydError as error:
                    raise rpc_failure(f"Write({subject})", error, self.target) from None
                if not response.indexed:
                    raise BenchError(f"Write({subject}) returned indexed=false: the memories were not searchable in time")
                for memory, result in zip(chunk, response.results, strict=True):
                    if not result.memory_id:
                        raise BenchError(f"memory {memory.id} ({language}) was not stored: {result.reason}")
                    by_memory.setdefault(result.memory_id, []).append(str(memory.id))
                progress.advance(len(chunk))
            self.ids[subject] = {memory_id: tuple(ids) for memory_id, ids in by_memory.items()}

    def recall(self, request: svc.RecallRequest) -> tuple[svc.RecallResponse, float]:
        request.top_k = self.options.k
        if self.options.min_relevance is not None:
            request.min_relevance = self.options.min_relevance
        began = time.perf_counter()
        response = self.client.recall(request, timeout=self.options.timeout)
        return response, (time.perf_counter() - began) * 1000

    def ask(self, mode: str, shape: str, dialogue: Dialogue, first: bool) -> Asked:
        subject = self.subject(languages(mode)[1], dialogue.user)
        cut = False
        if shape == "query":
            text, cut = fit_query(dialogue.history)
            request = svc.RecallRequest(subject=subject, query=text)
            sent = len(text.encode())
        else:
            said = dialogue.turns()
            request = svc.RecallRequest(subject=subject, context=context_turns(said, datetime.now(UTC)))
            sent = sum(len(s.text.encode()) for s in said)
        response, latency_ms = self.recall(request)
        ids = self.ids[subject]
        ranking = tuple(ids.get(s.memory.id, ()) for s in response.memories)
        returned = tuple(Returned("+".join(ranking[i]) or "?", s.relevance, s.similarity,
                                  s.cosine if s.HasField("cosine") else None, s.keyword_relevance)
                         for i, s in enumerate(response.memories))
        return Asked(mode, shape, dialogue.index, dialogue.user, tuple(str(i) for i in dialogue.relevant), ranking,
                     returned, latency_ms, sent, cut, first,
                     (response.degraded_reason or "(no reason given)") if response.degraded else None)

    def small_talk(self, stored: Sequence[str]) -> list[Chatted]:
        """Each small-talk conversation as context turns, of every subject written."""
        out = []
        for talk in load_small_talk():
            for language in stored:
                for user in sorted({m.user for m in self.data.memories[language].values()}):
                    request = svc.RecallRequest(subject=self.subject(language, user),
                                                context=context_turns(talk.said, datetime.now(UTC)))
                    try:
                        response, _ = self.recall(request)
                    except MemorydError as error:
                        raise rpc_failure("Recall(small talk)", error, self.target) from None
                    out.append(Chatted(talk.language, language, len(response.memories),
                                       max((m.relevance for m in response.memories), default=None)))
        return out

    def reference_sentences(self, count: int) -> dict[str, Any]:
        """The first user turn of the first ``count`` dialogues of each mode, each text once, as
        query, of the mode's subject: one short sentence each. Asked before the dialogues, so no
        call finds its text embedded already."""
        latency: list[float] = []
        sent: set[str] = set()
        for mode in self.options.modes:
            stored = languages(mode)[1]
            for dialogue in self.data.asked(mode, count):
                first = next((s.text for s in dialogue.turns() if s.speaker != ASSISTANT), None)
                if first is not None and first not in sent:
                    sent.add(first)
                    latency.append(self._reference_call(
                        svc.RecallRequest(subject=self.subject(stored, dialogue.user), query=first)))
        return {"what": f"the first user turn of the first {count} dialogues of each mode, each once (one short "
                        "sentence, e.g. \"Hey, did you know? I'm going to perform a magic trick at the New Year's "
                        "Eve party!\"), as query, of the same subjects",
                "calls": len(latency), "latency_ms": {"p50": percentile(latency, 50), "p99": percentile(latency, 99)}}

    def _reference_call(self, request: svc.RecallRequest) -> float:
        try:
            return self.recall(request)[1]
        except MemorydError as error:
            raise rpc_failure(f"Recall({request.subject}, a reference sentence)", error, self.target) from None


def _ask(run: _Run, result: MadialResult, progress: TextIO | None) -> None:
    """Every dialogue of every mode in each shape. The shapes take turns going first, dialogue by
    dialogue, so each has first calls (``Asked.first``) to time."""
    options = run.options
    seen: set[tuple[str, int]] = set()  # (the dialogue's language, its index)
    total = sum(len(run.data.asked(mode, options.limit, options.spread)) for mode in options.modes) * len(options.shapes)
    with Progress("recall", total, progress) as bar:
        for mode in options.modes:
            for dialogue in run.data.asked(mode, options.limit, options.spread):
                shapes = options.shapes if dialogue.index % 2 == 0 else options.shapes[::-1]
                for shape in shapes:
                    if shape in result.refused:
                        bar.advance()
                        continue
                    key = (languages(mode)[0], dialogue.index)
                    try:
                        result.asked.append(run.ask(mode, shape, dialogue, key not in seen))
                    except MemorydError as error:
                        if shape == "context" and ignores_context(error) \
                                and not any(a.shape == shape for a in result.asked):
                            # An older server: say so in the report, and measure the other shape.
                            result.refused[shape] = f"{error.code.name}: {error.message}"
                            bar.advance()
                            continue
                        raise rpc_failure(f"Recall({mode}, {shape}, dialogue {dialogue.index})", error,
                                          run.target) from None
                    seen.add(key)
                    bar.advance()


def run_madial(options: MadialOptions, progress: TextIO | None = None) -> MadialResult:
    options.check()
    data = load_set(options.folder)
    result = MadialResult(options)
    result.longest_query_bytes = max(len(d.history.encode()) for mode in options.modes
                                     for d in data.asked(mode, options.limit, options.spread))
    started = time.perf_counter()
    with server_for(options) as (target, token, server_info):
        result.server = server_info
        with MemorydClient(target, token=token, tls=options.tls, retry=NO_RETRY) as client:
            run = _Run(client, target, options, data)
            stored = sorted({languages(mode)[1] for mode in options.modes})
            with Progress("write ", sum(len(data.memories[language]) for language in stored), progress) as bar:
                for language in stored:
                    run.write(language, bar)
            if options.reference_questions:
                result.reference["sentences"] = run.reference_sentences(options.reference_questions)
            _ask(run, result, progress)
            if "context" not in result.refused:
                result.small_talk = run.small_talk(stored)
        if options.locomo is not None:
            locomo = run_locomo(LocomoOptions(dataset=options.locomo, conversations="1", addr=target, token=token,
                                              tls=options.tls, ks=(options.k,), batch_size=50,
                                              subject_prefix=f"{options.subject_prefix}-locomo"), progress)
            result.reference["locomo"] = {
                "what": f"LoCoMo {locomo.conversations[0].sample_id}: its {len(locomo.questions)} questions of "
                        f"categories 1-4 (bench locomo's protocol, top_k {options.k}), after its turns were written",
                "calls": len(locomo.questions),
                "latency_ms": {"p50": locomo.summary.latency_ms.get("p50"),
                               "p99": locomo.summary.latency_ms.get("p99")}}
    result.seconds = time.perf_counter() - started
    return result


