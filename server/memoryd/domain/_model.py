"""The memory model in the domain's words, independent of protobuf and of any store."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


# Characters no tag, key or other filterable value may hold: C0, DEL, C1 and the Unicode
# line and paragraph separators. Validation refuses them, extraction drops them, and the
# vector-index expressions refuse them as a last line of defence.
CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class Category(enum.StrEnum):
    FACT = "fact"
    PREFERENCE = "preference"
    CONSTRAINT = "constraint"
    GOAL = "goal"
    CONTEXT = "context"
    EVENT = "event"
    DECISION = "decision"

    @property
    def episodic(self) -> bool:
        return self in (Category.EVENT, Category.DECISION)


class Scope(enum.StrEnum):
    SUBJECT = "subject"
    ORG = "org"
    SESSION = "session"


class SourceKind(enum.StrEnum):
    INPUT = "input"
    INFERENCE = "inference"
    SYNC = "sync"

    @property
    def rank(self) -> int:
        """How strong a claim the kind is: INFERENCE < INPUT < SYNC (a view caps it)."""
        return _SOURCE_RANK[self]


_SOURCE_RANK = {SourceKind.INFERENCE: 0, SourceKind.INPUT: 1, SourceKind.SYNC: 2}


class Stability(enum.StrEnum):
    STABLE = "stable"
    TRANSIENT = "transient"


class Status(enum.StrEnum):
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    FORGOTTEN = "forgotten"


class Outcome(enum.StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    VERSIONED = "versioned"
    MERGED = "merged"
    UNCHANGED = "unchanged"
    REJECTED = "rejected"
    # Trusted less than the current value: kept as a pending value of that memory.
    PENDING = "pending"
    # Stored blind: the writer may write and not read this key, so its answer says nothing
    # about how the item met what is stored (see memoryd.server.guard).
    ACCEPTED = "accepted"


class Change(enum.StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    VERSIONED = "versioned"
    MERGED = "merged"
    FORGOTTEN = "forgotten"


class EraseMode(enum.StrEnum):
    FORGET = "forget"
    PURGE = "purge"


class Policy(enum.StrEnum):
    """How a write meets an existing memory of the same key (see ``policy_for``)."""

    LAST_WRITE_WINS = "last_write_wins"
    VERSIONED = "versioned"
    ACCUMULATE = "accumulate"
    APPEND = "append"


_POLICIES = {
    Category.PREFERENCE: Policy.LAST_WRITE_WINS,
    Category.GOAL: Policy.LAST_WRITE_WINS,
    Category.CONTEXT: Policy.LAST_WRITE_WINS,
    Category.FACT: Policy.VERSIONED,
    Category.CONSTRAINT: Policy.ACCUMULATE,
    Category.EVENT: Policy.APPEND,
    Category.DECISION: Policy.APPEND,
}


def first_turn(turns: tuple[str, ...]) -> str:
    """The first of a memory's source turns, or "": what ``source_turn_id`` says to clients
    (and servers) that know one turn only."""
    return turns[0] if turns else ""


def policy_for(category: Category) -> Policy:
    """The conflict policy of a category."""
    return _POLICIES[category]


@dataclass(frozen=True)
class Draft:
    """A validated item to write. The writing agent is added by the store from the principal."""

    category: Category
    text: str
    scope: Scope = Scope.SUBJECT
    session_id: str = ""
    key: str = ""
    data: dict[str, Any] | None = None
    importance: float = 0.5
    confidence: float = 1.0
    stability: Stability = Stability.STABLE
    pinned: bool = False
    tags: tuple[str, ...] = ()
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    source_kind: SourceKind = SourceKind.INPUT
    # Every dialogue turn the item comes from, best first: Erase by any of them removes it.
    source_turn_ids: tuple[str, ...] = ()

    @property
    def source_turn_id(self) -> str:
        """The first (best) source turn, or ""."""
        return first_turn(self.source_turn_ids)


class Resolution(enum.StrEnum):
    """How ResolveConflict settles a memory's pending values."""

    KEEP_CURRENT = "keep_current"
    ACCEPT_PENDING = "accept_pending"


@dataclass(frozen=True)
class PendingValue:
    """A value of a keyed memory held back because its source is trusted less than the
    current value's (see ``memoryd.storage.memories._trust``)."""

    id: str
    text: str
    data: dict[str, Any] | None
    agent: str
    source_kind: SourceKind
    source_turn_ids: tuple[str, ...]
    trust: float
    written_at: datetime
    content_unavailable: bool = False

    @property
    def source_turn_id(self) -> str:
        return first_turn(self.source_turn_ids)


@dataclass(frozen=True)
class Memory:
    """One memory (or one version of it) as stored."""

    id: str
    subject: str
    scope: Scope
    session_id: str
    category: Category
    key: str
    text: str
    data: dict[str, Any] | None
    importance: float
    confidence: float
    stability: Stability
    pinned: bool
    tags: tuple[str, ...]
    valid_from: datetime | None
    valid_until: datetime | None
    agent: str
    source_kind: SourceKind
    # Every turn the memory answers to (see ``Draft.source_turn_ids``); a merge adds the
    # merged item's turns, a new value replaces them (the old version keeps its own).
    source_turn_ids: tuple[str, ...]
    version: int
    status: Status
    created_at: datetime
    updated_at: datetime
    access_count: int = 0
    last_access_at: datetime | None = None
    # The text and data could not be decrypted (the subject's data key is missing or cannot
    # be unwrapped): ``text`` is then "" and ``data`` None — never ciphertext or garbage.
    content_unavailable: bool = False
    # When its time to live runs out (None: never); the trust of the source that wrote it.
    expires_at: datetime | None = None
    trust: float = 0.0
    pending: tuple[PendingValue, ...] = ()

    @property
    def source_turn_id(self) -> str:
        return first_turn(self.source_turn_ids)


@dataclass(frozen=True)
class WriteResult:
    memory_id: str
    outcome: Outcome
    reason: str
    version: int


BLIND_REASON = ("stored; this agent's view does not read this key, so the answer does not say how the item met "
                "what is stored")


def blind_answer(draft: Draft, result: WriteResult) -> WriteResult:
    """What a writer that cannot see what its item met is told: the same whatever is stored.

    An item of an appending or accumulating category always became a memory of its own
    (CREATED, its new id, version 1); a keyed last-write-wins or versioned item is ACCEPTED,
    with no id and no version (which memory it changed, or whether it was held pending,
    depends on what the writer cannot see).
    """
    if result.outcome is Outcome.REJECTED:
        return result
    if policy_for(draft.category) in (Policy.APPEND, Policy.ACCUMULATE):
        return WriteResult(result.memory_id, Outcome.CREATED, "", 1)
    return WriteResult("", Outcome.ACCEPTED, BLIND_REASON, 0)


@dataclass(frozen=True)
class MemoryVersion:
    memory: Memory
    change: Change
    recorded_at: datetime


class ChangeKind(enum.StrEnum):
    """What one row of the change log says happened (Watch)."""

    CREATED = "created"
    CHANGED = "changed"
    FORGOTTEN = "forgotten"
    ERASED = "erased"
    SUBJECT_ERASED = "subject_erased"


@dataclass(frozen=True)
class LoggedChange:
    """One row of the change log, in commit order (``seq``). ``key`` is opened only for an
    ERASED row (None: it could not be), whose memory can no longer be read; the others are
    read as their version ``version``. A SUBJECT_ERASED row has no memory, category or key."""

    seq: int
    kind: ChangeKind
    memory_id: str
    subject: str
    scope: Scope
    session_id: str
    category: Category | None
    version: int
    key: str | None = None


@dataclass(frozen=True)
class FilterLabels:
    """A read filter's key names, tags and key patterns as the stores hold them: keyed labels
    (lower-case hex; "" stands for "no key"). Set by the memory store, which alone can open
    the key names a glob must be matched against; every filter compiler requires them.
    """

    keys: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    # Per view rule: None allows every key of the category, else exactly these labels.
    rules: tuple[tuple[Category, tuple[str, ...] | None], ...] = ()


@dataclass(frozen=True)
class ReadFilter:
    """What a read may consider: the request's filter already narrowed by the caller's view.

    Built only by the guard (``memoryd.server.guard``); stores push every field down
    into their queries.
    """

    subject: str
    categories: tuple[Category, ...] = ()
    keys: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    session_id: str = ""
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    include_org: bool = False
    # Every session's memories of the subject (GetHistory of one id), not just session_id's.
    any_session: bool = False
    statuses: tuple[Status, ...] = (Status.ACTIVE,)
    # The view's read rules as (category, key patterns); empty means nothing is readable.
    rules: tuple[tuple[Category, tuple[str, ...]], ...] = ()
    # keys, tags and rules as labels (``FilterLabels``), added by the memory store.
    labels: FilterLabels | None = None


@dataclass(frozen=True)
class EraseSelector:
    """Exactly one of the fields is set."""

    ids: tuple[str, ...] = ()
    key: str = ""
    source_turn_id: str = ""
    category: Category | None = None
    all_of_subject: bool = False

    @property
    def kind(self) -> str:
        """Which selector this is, as named in a view's erase_selectors."""
        if self.ids:
            return "ids"
        if self.key:
            return "key"
        if self.source_turn_id:
            return "source_turn"
        if self.category is not None:
            return "category"
        return "all_of_subject"

    def describe(self) -> dict[str, Any]:
        if self.ids:
            return {"ids": list(self.ids)}
        if self.key:
            return {"key": self.key}
        if self.source_turn_id:
            return {"source_turn_id": self.source_turn_id}
        if self.category is not None:
            return {"category": self.category.value}
        return {"all_of_subject": True}


@dataclass(frozen=True)
class AuditTag:
    """What an audit event records about the call behind it: the request id, the trace id
    and the version of the view the caller acted through (None for admin calls)."""

    request_id: str = ""
    trace_id: str = ""
    view_version: int | None = None


@dataclass(frozen=True)
class StoreCounts:
    memories: int = 0
    versions: int = 0
    outbox: int = 0
    vectors: int = 0
    jobs: int = 0
    keys: int = 0


@dataclass(frozen=True)
class ErasureReceipt:
    erase_id: str
    mode: EraseMode
    counts: StoreCounts
    verified: bool
    started_at: datetime
    finished_at: datetime
    # What ``verified`` could not check physically (e.g. "postgres_wal_and_dead_tuples",
    # "vector_store_files", "backups"): copies that may outlive a PURGE where no read shows them.
    unchecked: tuple[str, ...] = ()
    # An erase of a whole subject: the organisation's memories (that the caller reads) naming
    # the subject, which it leaves; None where the caller cannot read the organisation's.
    organisation_mentions: int | None = None
    # What a background check is still confirming ("vector_index": the vectors' deletion;
    # "vector_store_files": a Milvus server's compaction). The same Erase retried answers
    # with the receipt as the latest check left it.
    pending: tuple[str, ...] = ()


@dataclass(frozen=True)
class Page:
    """Where a listing continues: after (updated_at, id) in descending order — or, ``by_id``,
    after ``after_id`` in descending id order, for a caller whose view hides updated_at (the
    order of a listing must not tell what a hidden field holds)."""

    after_updated_at: datetime | None = None
    after_id: str = ""
    size: int = 50
    by_id: bool = False


@dataclass
class Listing:
    memories: list[Memory] = field(default_factory=list)
    has_more: bool = False
