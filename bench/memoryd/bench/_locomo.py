"""The LoCoMo retrieval benchmark against a real memoryd over gRPC.

Protocol: every turn of a conversation becomes one EVENT memory of one subject per
conversation (``<prefix>-<sample_id>``), text ``"<speaker>: <text>"`` (plus the image
caption), ``source_turn_id`` = the turn's dia_id, ``valid_from`` = the session's date, tags
``session_<N>`` and ``entity:<speaker>`` (who said it: a question that names them lifts their
turns; ``--no-entities`` leaves it out). Turns are written in batches of at most 100 with CONSISTENCY_WAIT_INDEXED; a
response with ``indexed = false`` stops the run. Then every question of categories 1–4 is
asked once with ``Recall(subject, query=question, top_k=max(ks))``, one call at a time, timed
on the client, and the recalled memories are mapped back to dia_ids.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TextIO

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from memoryd.client import NO_RETRY, TLS, MemorydClient, MemorydError
from memoryd.domain import entity_tag
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from ._dataset import Conversation, Question, Turn, load_locomo, select_conversations, subject_for
from ._metrics import QuestionResult, Summary, channel_hits, summarise
from memoryd.cli import Progress
from ._server import EmbeddedServer
from ._trace import traced

MAX_BATCH = 100
MAX_TOP_K = 100


class BenchError(RuntimeError):
    """The benchmark cannot go on; the message says why."""


@dataclass(frozen=True)
class LocomoOptions:
    dataset: Path
    conversations: str | None = None
    addr: str | None = None  # None: start an embedded server
    tls: TLS | None = None  # with addr: TLS or mutual TLS to it
    token: str = ""
    ks: tuple[int, ...] = (5, 10, 25)
    batch_size: int = MAX_BATCH
    subject_prefix: str = "locomo"
    min_relevance: float | None = None  # None: the server's default
    off_topic: bool = False  # also ask each conversation's questions of the next one's memories
    neighbours: bool = True  # False: every Recall asks with exclude_neighbours
    entities: bool = True  # False: turns are written without their speaker's entity tag
    write_timeout: float = 60.0  # the server waits for indexing up to the deadline, at most 30 s
    recall_timeout: float = 30.0
    start_timeout: float = 180.0

    def check(self) -> None:
        if not self.ks or min(self.ks) < 1 or max(self.ks) > MAX_TOP_K:
            raise BenchError(f"every k must be between 1 and {MAX_TOP_K}")
        if not 1 <= self.batch_size <= MAX_BATCH:
            raise BenchError(f"the batch size must be between 1 and {MAX_BATCH}")
        if self.addr is not None and not self.token:
            raise BenchError("--addr needs a token: --token, $MEMORYD_TOKEN or --token-file")
        if self.min_relevance is not None and not 0 <= self.min_relevance <= 1:
            raise BenchError("the minimum relevance must be between 0 and 1")


@dataclass
class OffTopic:
    """Questions asked of another conversation's memories, and how many got nothing back; and
    those that name a speaker asked again with the other conversation's speakers' names."""
    asked: int = 0
    empty: int = 0
    named_asked: int = 0
    named_empty: int = 0


@dataclass
class WriteStats:
    memories: int = 0
    batches: int = 0
    seconds: float = 0.0
    outcomes: Counter[str] = field(default_factory=Counter)

    @property
    def per_second(self) -> float | None:
        return self.memories / self.seconds if self.seconds > 0 else None


@dataclass
class LocomoResult:
    options: LocomoOptions
    conversations: list[Conversation]
    writes: WriteStats
    questions: list[QuestionResult]
    summary: Summary
    server: dict[str, Any]
    unmapped_memories: int = 0
    degraded_reasons: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    off_topic: OffTopic | None = None

    @property
    def skipped(self) -> dict[int, int]:
        total: Counter[int] = Counter()
        for conversation in self.conversations:
            total.update(conversation.skipped)
        return dict(total)

    @property
    def channels(self) -> dict[str, int]:
        return channel_hits(self.questions, max(self.summary.ks))


def rpc_failure(what: str, error: MemorydError, target: str = "") -> BenchError:
    """The one wording of a benchmark call that failed: what, the status, its message, a hint."""
    code, details, name = error.code, error.message, error.code.name
    hint = ""
    if code == grpc.StatusCode.UNIMPLEMENTED:
        hint = " (this server does not implement it yet)"
    elif code == grpc.StatusCode.UNAVAILABLE and target:
        hint = f" (is memoryd running at {target}?)"
    elif code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        hint = " (check the token)"
    return BenchError(f"{what} failed: {name}: {details}{hint}")


def ensure_empty(client: MemorydClient, subject: str, target: str, timeout: float) -> None:
    """Refuse to write into a subject that already holds memories: they would skew the result."""
    try:
        page = client.memory_view(svc.MemoryViewRequest(subject=subject, page_size=1), timeout=timeout)
    except MemorydError as error:
        raise rpc_failure(f"MemoryView({subject})", error, target) from None
    if page.memories:
        raise BenchError(f"subject {subject!r} already holds memories on {target}; "
                         "use another --subject-prefix (or erase it) so the run starts empty")


def timestamp(when: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(when)
    return stamp


def draft_for(turn: Turn, entities: bool = True) -> pb.MemoryDraft:
    speaker = entity_tag(turn.speaker) if entities and turn.speaker else None
    draft = pb.MemoryDraft(category=pb.CATEGORY_EVENT, text=turn.text, source_turn_id=turn.source_turn_id,
                           tags=[turn.tag, speaker] if speaker else [turn.tag])
    if turn.valid_from is not None:
        draft.valid_from.CopyFrom(timestamp(turn.valid_from))
    return draft


def _batches(turns: Sequence[Turn], size: int) -> Iterator[Sequence[Turn]]:
    for start in range(0, len(turns), size):
        yield turns[start:start + size]


class Session:
    """One benchmark run's calls: a client (with the credential, no retries) and the per-call deadlines."""

    def __init__(self, client: MemorydClient, target: str, options: LocomoOptions,
                 recall_trace: Callable[[], str] | None = None) -> None:
        self.client = client
        # A trace id for each Recall, asked once per call in order (to find its server spans).
        self.recall_trace = recall_trace
        self.target = target
        self.options = options

    def ensure_empty(self, subject: str) -> None:
        ensure_empty(self.client, subject, self.target, self.options.recall_timeout)

    def write(self, subject: str, conversation: Conversation, stats: WriteStats,
              progress: Progress) -> dict[str, tuple[str, ...]]:
        """Write every turn; returns memory id → the dia_ids written into it (repeats merge)."""
        by_memory: dict[str, list[str]] = {}
        for batch in _batches(conversation.turns, self.options.batch_size):
            request = svc.WriteRequest(subject=subject, items=[draft_for(t, self.options.entities) for t in batch],
                                       consistency=svc.CONSISTENCY_WAIT_INDEXED)
            started = time.perf_counter()
            try:
                response = self.client.write(request, timeout=self.options.write_timeout)
            except MemorydError as error:
                raise rpc_failure(f"Write({subject}, turns {batch[0].dia_id}..{batch[-1].dia_id})", error,
                                  self.target) from None
            stats.seconds += time.perf_counter() - started
            if not response.indexed:
                raise BenchError(f"Write({subject}, turns {batch[0].dia_id}..{batch[-1].dia_id}) returned "
                                 "indexed=false: the memories were not searchable before the wait ran out")
            if len(response.results) != len(batch):
                raise BenchError(f"Write({subject}) returned {len(response.results)} results for {len(batch)} items")
            for turn, result in zip(batch, response.results):
                outcome = svc.WriteOutcome.Name(result.outcome).removeprefix("WRITE_OUTCOME_")
                stats.outcomes[outcome] += 1
                if result.outcome == svc.WRITE_OUTCOME_REJECTED or not result.memory_id:
                    raise BenchError(f"turn {turn.dia_id} of {conversation.sample_id} was not stored: "
                                     f"{outcome}: {result.reason}")
                by_memory.setdefault(result.memory_id, []).append(turn.dia_id)
            stats.memories += len(batch)
            stats.batches += 1
            progress.advance(len(batch))
        return {memory_id: tuple(ids) for memory_id, ids in by_memory.items()}

    def ask(self, subject: str, conversation: Conversation, by_memory: dict[str, tuple[str, ...]],
            result: LocomoResult, progress: Progress) -> None:
        """Ask every question of categories 1–4 once and record what came back."""
        by_turn_id = {t.source_turn_id: t.dia_id for t in conversation.turns}
        for question in conversation.questions:
            started = time.perf_counter()
            response = self.recall(subject, question)
            latency_ms = (time.perf_counter() - started) * 1000
            ranking: list[tuple[str, ...]] = []
            channels: list[str] = []
            for scored in response.memories:
                ids = list(by_memory.get(scored.memory.id, ()))
                from_turn = by_turn_id.get(scored.memory.provenance.source_turn_id)
                if from_turn is not None and from_turn not in ids:
                    ids.append(from_turn)
                if not ids:
                    result.unmapped_memories += 1
                ranking.append(tuple(ids))
                dense, keyword = scored.dense_rank > 0, scored.keyword_rank > 0
                channels.append("both" if dense and keyword else "dense" if dense else "keyword" if keyword else "")
            if response.degraded:
                result.degraded_reasons[response.degraded_reason or "(no reason given)"] += 1
            result.questions.append(QuestionResult(conversation.sample_id, question.index, question.category,
                                                   question.evidence, tuple(ranking), latency_ms, tuple(channels),
                                                   response.degraded))
            progress.advance()

    def recall(self, subject: str, question: Question, text: str | None = None) -> svc.RecallResponse:
        request = svc.RecallRequest(subject=subject, query=question.question if text is None else text,
                                    top_k=max(self.options.ks))
        if self.options.min_relevance is not None:
            request.min_relevance = self.options.min_relevance
        request.exclude_neighbours = not self.options.neighbours
        try:
            with traced(self.recall_trace()) if self.recall_trace else nullcontext():
                return self.client.recall(request, timeout=self.options.recall_timeout)
        except MemorydError as error:
            raise rpc_failure(f"Recall({subject}, question {question.index})", error, self.target) from None

    def ask_off_topic(self, subject: str, conversation: Conversation, other: Conversation, off_topic: OffTopic,
                      progress: Progress) -> None:
        """Ask ``conversation``'s questions of ``other``'s ``subject``: nothing there answers
        them, so the right answer is an empty one. A question that names a speaker is asked
        again with ``other``'s speakers' names (its entity tags then match): still nothing
        answers it."""
        for question in conversation.questions:
            off_topic.asked += 1
            off_topic.empty += not self.recall(subject, question).memories
            renamed = conversation.renamed(question.question, other)
            if renamed != question.question:
                off_topic.named_asked += 1
                off_topic.named_empty += not self.recall(subject, question, renamed).memories
            progress.advance()


class ServerChoice(Protocol):
    """Where a benchmark's calls go: the memoryd at ``addr``, or (``addr`` None) an embedded one."""

    @property
    def addr(self) -> str | None: ...
    @property
    def tls(self) -> TLS | None: ...
    @property
    def token(self) -> str: ...
    @property
    def start_timeout(self) -> float: ...


@contextmanager
def server_for(options: ServerChoice) -> Iterator[tuple[str, str, dict[str, Any]]]:
    if options.addr is not None:
        yield options.addr, options.token, {"embedded": False, "addr": options.addr, "tls": options.tls is not None}
        return
    with EmbeddedServer(start_timeout=options.start_timeout) as server:
        yield server.target, server.token, {"embedded": True, "addr": server.target,
                                            "passed_on": list(server.passed_on)}


def run_locomo(options: LocomoOptions, progress: TextIO | None = None, *,
               recall_trace: Callable[[], str] | None = None) -> LocomoResult:
    """Load the dataset, write the chosen conversations, ask their questions, summarise.
    ``recall_trace`` gives each Recall its trace id (called once per question, in order)."""
    options.check()
    conversations = select_conversations(load_locomo(options.dataset), options.conversations)
    started = time.perf_counter()
    with server_for(options) as (target, token, server_info):
        # No retries: a benchmark counts what fails rather than hiding it.
        with MemorydClient(target, token=token, tls=options.tls, retry=NO_RETRY) as client:
            try:
                grpc.channel_ready_future(client.channel).result(timeout=30)
            except grpc.FutureTimeoutError:
                raise BenchError(f"cannot connect to memoryd at {target}") from None
            session = Session(client, target, options, recall_trace)
            result = LocomoResult(options, conversations, WriteStats(), [], summarise([], options.ks), server_info)
            subjects = [subject_for(options.subject_prefix, c.sample_id) for c in conversations]
            for subject in subjects:
                session.ensure_empty(subject)
            written: list[dict[str, tuple[str, ...]]] = []
            with Progress("write ", sum(len(c.turns) for c in conversations), progress) as bar:
                for subject, conversation in zip(subjects, conversations):
                    written.append(session.write(subject, conversation, result.writes, bar))
            with Progress("recall", sum(len(c.questions) for c in conversations), progress) as bar:
                for subject, conversation, by_memory in zip(subjects, conversations, written):
                    session.ask(subject, conversation, by_memory, result, bar)
            if options.off_topic and len(conversations) > 1:
                result.off_topic = OffTopic()
                with Progress("off-topic", sum(len(c.questions) for c in conversations), progress) as bar:
                    for i, conversation in enumerate(conversations):
                        other = (i + 1) % len(subjects)
                        session.ask_off_topic(subjects[other], conversation, conversations[other], result.off_topic,
                                              bar)
    result.summary = summarise(result.questions, options.ks)
    result.seconds = time.perf_counter() - started
    return result
