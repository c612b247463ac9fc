"""The bilingual recall benchmark: cross-language and mixed-language questions over keyed and
episodic memories, against a real memoryd over gRPC.

Protocol: every invented user of the set (``bench/bilingual/bilingual.json``) is one subject
(``<prefix>-<user>``); their memories, Chinese and English, keyed and episodic, are written in
one Write per user with CONSISTENCY_WAIT_INDEXED. Then every question is asked once with
``Recall(subject, query, top_k=k)``, one call at a time. A question is a hit when any memory
that answers it is among the first k returned; a question of kind ``none`` (nothing answers
it) counts as right when nothing comes back. Each returned memory's relevance, cosine and
keyword relevance are kept, so a minimum relevance can be chosen from one run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from memoryd.client import NO_RETRY, TLS, MemorydClient, MemorydError
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from .._locomo import BenchError, rpc_failure, server_for
from .._metrics import percentile
from memoryd.cli import Progress

DEFAULT_DATASET = Path(__file__).resolve().parents[4] / "bench" / "bilingual" / "bilingual.json"
KINDS = ("zh-en", "en-zh", "mixed", "none")  # query language → memory language; none: nothing answers


@dataclass(frozen=True)
class Item:
    id: str
    category: str
    key: str
    text: str


@dataclass(frozen=True)
class Query:
    subject: str
    kind: str
    query: str
    relevant: tuple[str, ...]


@dataclass(frozen=True)
class BilingualSet:
    users: dict[str, tuple[Item, ...]]
    queries: tuple[Query, ...]


def read_set(path: Path, kind: str) -> dict[str, Any]:
    """One of the project's own JSON sets (``"format": "memoryd-<kind>"``), or BenchError."""
    try:
        doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BenchError(f"cannot read the {kind} set {path}: {exc}") from None
    if doc.get("format") != f"memoryd-{kind}":
        raise BenchError(f"{path} is not a memoryd-{kind} set")
    return doc


def load_set(path: Path) -> BilingualSet:
    """Read and check the set: known kinds and categories, relevant ids of the asking user."""
    doc = read_set(path, "bilingual")
    users = {u["subject"]: tuple(Item(m["id"], m["category"], m.get("key", ""), m["text"]) for m in u["memories"])
             for u in doc["users"]}
    queries = tuple(Query(q["subject"], q["kind"], q["query"], tuple(q["relevant"])) for q in doc["queries"])
    for item in (i for items in users.values() for i in items):
        if f"CATEGORY_{item.category}" not in pb.Category.keys():
            raise BenchError(f"memory {item.id}: unknown category {item.category!r}")
    for q in queries:
        ids = {i.id for i in users.get(q.subject, ())}
        if q.kind not in KINDS or q.subject not in users or not set(q.relevant) <= ids \
                or (q.kind == "none") != (not q.relevant):
            raise BenchError(f"question {q.query!r}: bad subject, kind or relevant ids")
    return BilingualSet(users, queries)


@dataclass(frozen=True)
class BilingualOptions:
    dataset: Path = DEFAULT_DATASET
    addr: str | None = None  # None: start an embedded server
    tls: TLS | None = None
    token: str = ""
    k: int = 5
    min_relevance: float | None = None  # None: the server's default
    subject_prefix: str = "bilingual"
    timeout: float = 60.0
    start_timeout: float = 180.0

    def check(self) -> None:
        if not 1 <= self.k <= 100:
            raise BenchError("k must be between 1 and 100")
        if self.min_relevance is not None and not 0 <= self.min_relevance <= 1:
            raise BenchError("the minimum relevance must be between 0 and 1")
        if self.addr is not None and not self.token:
            raise BenchError("--addr needs a token: --token, $MEMORYD_TOKEN or --token-file")


@dataclass(frozen=True)
class Returned:
    """One recalled memory: its id in the set and the signals the server gave for it."""
    id: str
    relevance: float
    similarity: float
    cosine: float | None
    keyword_relevance: float


@dataclass(frozen=True)
class Asked:
    query: Query
    returned: tuple[Returned, ...]
    latency_ms: float

    def right(self, k: int) -> bool:
        """A hit in the first k, or, for a question nothing answers, an empty answer."""
        if not self.query.relevant:
            return not self.returned
        return any(r.id in self.query.relevant for r in self.returned[:k])


@dataclass
class BilingualResult:
    options: BilingualOptions
    asked: list[Asked] = field(default_factory=list)
    server: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def rows(self) -> list[tuple[str, int, float]]:
        """(kind, questions, share right) per kind, then every answerable question together."""
        out = []
        for kind in KINDS:
            asked = [a for a in self.asked if a.query.kind == kind]
            if asked:
                out.append((kind, len(asked), sum(a.right(self.options.k) for a in asked) / len(asked)))
        answerable = [a for a in self.asked if a.query.relevant]
        if answerable:
            out.append(("answerable", len(answerable),
                        sum(a.right(self.options.k) for a in answerable) / len(answerable)))
        return out

    def latency(self) -> dict[str, float | None]:
        values = [a.latency_ms for a in self.asked]
        return {"p50": percentile(values, 50), "p99": percentile(values, 99)}


def _write(client: MemorydClient, subject: str, items: Sequence[Item], options: BilingualOptions,
           target: str) -> dict[str, str]:
    """Write one user's memories; returns memory id → the set's id."""
    request = svc.WriteRequest(subject=subject, consistency=svc.CONSISTENCY_WAIT_INDEXED, items=[
        pb.MemoryDraft(category=pb.Category.Value(f"CATEGORY_{i.category}"), key=i.key, text=i.text) for i in items])
    try:
        response = client.write(request, timeout=options.timeout)
    except MemorydError as error:
        raise rpc_failure(f"Write({subject})", error, target) from None
    if not response.indexed:
        raise BenchError(f"Write({subject}) returned indexed=false: the memories were not searchable in time")
    by_memory = {}
    for item, result in zip(items, response.results, strict=True):
        if not result.memory_id:
            raise BenchError(f"memory {item.id} was not stored: {result.reason}")
        by_memory[result.memory_id] = item.id
    return by_memory


def run_bilingual(options: BilingualOptions, progress: TextIO | None = None) -> BilingualResult:
    options.check()
    data = load_set(options.dataset)
    result = BilingualResult(options)
    started = time.perf_counter()
    with server_for(options) as (target, token, server_info):
        result.server = server_info
        with MemorydClient(target, token=token, tls=options.tls, retry=NO_RETRY) as client:
            subjects = {user: f"{options.subject_prefix}-{user}" for user in data.users}
            ids: dict[str, str] = {}
            with Progress("write ", len(data.users), progress) as bar:
                for user, items in data.users.items():
                    ids |= _write(client, subjects[user], items, options, target)
                    bar.advance()
            with Progress("recall", len(data.queries), progress) as bar:
                for q in data.queries:
                    request = svc.RecallRequest(subject=subjects[q.subject], query=q.query, top_k=options.k)
                    if options.min_relevance is not None:
                        request.min_relevance = options.min_relevance
                    began = time.perf_counter()
                    try:
                        response = client.recall(request, timeout=options.timeout)
                    except MemorydError as error:
                        raise rpc_failure(f"Recall({q.query!r})", error, target) from None
                    latency_ms = (time.perf_counter() - began) * 1000
                    returned = tuple(Returned(ids.get(s.memory.id, "?"), s.relevance, s.similarity,
                                              s.cosine if s.HasField("cosine") else None, s.keyword_relevance)
                                     for s in response.memories)
                    result.asked.append(Asked(q, returned, latency_ms))
                    bar.advance()
    result.seconds = time.perf_counter() - started
    return result


def report(result: BilingualResult) -> str:
    k = result.options.k
    lines = [f"{'kind':<12} {'questions':>9} {f'hit@{k}':>7}"]
    for kind, n, share in result.rows():
        label = "none: empty" if kind == "none" else kind
        lines.append(f"{label:<12} {n:>9} {share:>7.3f}")
    latency = result.latency()
    lines.append(f"Recall p50 {latency['p50']:.1f} ms, p99 {latency['p99']:.1f} ms; "
                 f"min_relevance {'server default' if result.options.min_relevance is None else result.options.min_relevance}")
    return "\n".join(lines)


def json_result(result: BilingualResult) -> dict[str, Any]:
    return {
        "k": result.options.k, "min_relevance": result.options.min_relevance, "server": result.server,
        "seconds": result.seconds, "latency_ms": result.latency(),
        "rows": [{"kind": kind, "questions": n, "right": share} for kind, n, share in result.rows()],
        "questions": [{"subject": a.query.subject, "kind": a.query.kind, "query": a.query.query,
                       "relevant": list(a.query.relevant), "right": a.right(result.options.k),
                       "latency_ms": a.latency_ms,
                       "returned": [r.__dict__ for r in a.returned]} for a in result.asked],
    }
