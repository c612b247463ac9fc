"""Write: the per-category conflict policies, applied to all items in one transaction."""

from __future__ import annotations

import math
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from psycopg.types.json import Jsonb

from memoryd.domain import (
    CONTRACT,
    Change,
    Draft,
    IdempotencyKeyReused,
    Outcome,
    Policy,
    Scope,
    Slices,
    TenantPolicy,
    WriteResult,
    different_dates,
    policy_for,
)

from ..postgres import counters
from . import _trust as trust
from ..keys import DataKey, open_row
from .._filters import LIVE_NOW
from ..keywords import TermHasher
from ..postgres import TenantConn
from ._rows import MEMORY_COLUMNS, joined_turns, same_value, source_turns, stored_trust, turn_values
from ._write_batch import (
    ADD_TURNS,
    INSERT_MEMORY,
    MERGE_REPEAT,
    UPDATE_MEMORY,
    WriteBatch,
    pipeline,
)

if TYPE_CHECKING:
    from ._bound import Bound


@dataclass(frozen=True)
class Written:
    """What a Write did: each item's result, and the ids among them whose index work was
    still queued (pending or dead) when the write committed."""

    results: list[WriteResult]
    unindexed: frozenset[str]


async def unindexed(session: Bound, conn: TenantConn, results: list[WriteResult],
                    enqueued: frozenset[str] = frozenset()) -> Callable[[], Awaitable[frozenset[str]]]:
    """Ask which ids of ``results`` have outbox rows (pending or dead), in the caller's
    transaction; the answer is read by awaiting the returned call (in a pipelined
    transaction, the question rides with the statements sent before the next answer read).
    The ``enqueued`` ids got one in this transaction: they are not asked about."""
    tenant = session.tenant
    ids = sorted({r.memory_id for r in results if r.memory_id} - enqueued)
    if not ids:
        async def known() -> frozenset[str]:
            return enqueued
        return known
    cur = await conn.execute(
        "SELECT DISTINCT memory_id FROM outbox WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[])", (tenant, ids)
    )

    async def answer() -> frozenset[str]:
        return enqueued | frozenset(str(r["memory_id"]) for r in await cur.fetchall())
    return answer


async def claim_idempotency(session: Bound, conn: TenantConn, key: str, request_hash: bytes) -> Any:
    """Claim ``key`` for this request (a Write of items, or the queuing of an extraction job):
    None for the first attempt, else the first attempt's stored response. A concurrent first
    attempt holds the key's row lock until it commits, so a retry waits for it and then reads
    its response. A key used for another request (another hash), or whose first attempt
    stored no response, is IdempotencyKeyReused."""
    tenant, agent = session.tenant, session.agent
    cur = await conn.execute(
        "INSERT INTO idempotency_keys (tenant_id, agent, key, request_hash) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT DO NOTHING RETURNING key",
        (tenant, agent, key, request_hash),
    )
    if await cur.fetchone() is not None:
        return None
    cur = await conn.execute(
        "SELECT request_hash, response FROM idempotency_keys WHERE tenant_id = %s AND agent = %s AND key = %s",
        (tenant, agent, key),
    )
    row = await cur.fetchone()
    if row is None or bytes(row["request_hash"]) != request_hash or row["response"] is None:
        raise IdempotencyKeyReused()
    return row["response"]


async def store_idempotent_response(session: Bound, conn: TenantConn, key: str, response: Any) -> None:
    tenant, agent = session.tenant, session.agent  # of the request that claimed ``key``
    await conn.execute(
        "UPDATE idempotency_keys SET response = %s WHERE tenant_id = %s AND agent = %s AND key = %s",
        (Jsonb(response), tenant, agent, key),
    )


def write_response(results: list[WriteResult]) -> list[dict[str, Any]]:
    """A Write's results as its idempotency record keeps them (``written_before`` reads them)."""
    return [{"memory_id": r.memory_id, "outcome": r.outcome.value, "reason": r.reason, "version": r.version}
            for r in results]


def written_before(response: Any) -> list[WriteResult]:
    if not isinstance(response, list):  # the key queued an extraction job
        raise IdempotencyKeyReused()
    return [WriteResult(r["memory_id"], Outcome(r["outcome"]), r["reason"], r["version"]) for r in response]


KeyFor = Callable[[str], Awaitable[DataKey]]
_REPLACING = (Policy.LAST_WRITE_WINS, Policy.VERSIONED)


@dataclass(frozen=True)
class _Item:
    """One draft of a batch, with what its policy needs to know before it meets the store."""

    draft: Draft
    blind: bool
    owner: str  # the memory's subject ('' for the organisation)
    session: str
    policy: Policy
    key: DataKey
    digest: bytes
    label: bytes  # the key's label (b"" for no key)
    lock: str  # the name writers of the same key (or, unkeyed, the same text) serialise on

    @property
    def slot(self) -> tuple[str, str, str, bytes]:
        return (self.owner, self.session, self.draft.category.value, self.label)

    @property
    def looks(self) -> str:
        """What the item reads before it is written: the key's current row (locked), the
        key's active constraints, the latest repeat of its text (locked), or nothing."""
        if self.draft.key and self.policy in _REPLACING:
            return "current"
        if self.blind:
            return ""
        return "constraints" if self.draft.key else "repeat"


# What an item meets is what a read would serve (``LIVE_NOW``, the filter compiler's
# liveness): a lapsed constraint or event is never found equal or merged into. A key's
# current row is the one active row of its slot (a unique index), live or not: a lapsed one
# is replaced whatever it holds (``_replace``). Several live matches (copies written blind)
# are met in id order, so which one is met depends on no field a view may hide.
_LOOK_UPS = {
    "current": (
        f"SELECT {MEMORY_COLUMNS}, key_label, ({LIVE_NOW}) AS live FROM memories WHERE tenant_id = %s "
        "AND status = 'active' AND (subject, session_id, category, key_label) IN "
        "(SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::bytea[])) FOR UPDATE"
    ),
    "constraints": (
        "SELECT id, version, text_hash, subject, session_id, category, key_label, source_turn_id, source_turn_ids "
        "FROM memories "
        f"WHERE tenant_id = %s AND {LIVE_NOW} AND (subject, session_id, category, key_label) IN "
        "(SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::bytea[])) ORDER BY id"
    ),
    "repeat": (
        "SELECT id, version, importance, tags, tags_ct, pinned, subject, session_id, category, text_hash, "
        "source_turn_id, source_turn_ids "
        f"FROM memories WHERE tenant_id = %s AND key_label = '\\x' AND {LIVE_NOW} "
        "AND (subject, session_id, category, text_hash) IN "
        "(SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::bytea[])) "
        "ORDER BY id FOR UPDATE"
    ),
}


class ItemWriter:
    """Applies items' conflict policies inside the caller's transaction.

    ``key_for(owner)`` gives the data key of the memory's owner (the subject, or '' for the
    organisation), locked for the rest of the transaction; text and data are stored only
    sealed with it. ``write_all`` costs a few round trips per batch, not per item: one
    statement takes every item's lock, one per kind reads what the items meet, and the
    writes they decide are sent together (``WriteBatch``).
    """

    def __init__(self, conn: TenantConn, agent: str, subject: str,
                 hasher: TermHasher, key_for: KeyFor, policy: TenantPolicy = TenantPolicy()) -> None:
        tenant = conn.tenant
        self._conn = conn
        self._policy = policy
        self._tenant = tenant
        self._agent = agent
        self._subject = subject
        self._hasher = hasher
        self._key_for = key_for
        self._batch = WriteBatch(conn, hasher)

    async def write(self, draft: Draft, *, blind: bool = False) -> WriteResult:
        """Apply ``draft``'s category policy (``write_all`` of one item), its writes sent and checked."""
        [result] = await self.write_all([draft], [blind])
        await self.finish()
        return result

    async def write_all(self, drafts: list[Draft], blind: list[bool]) -> list[WriteResult]:
        """Apply each draft's category policy, in order, as if written one after the other.

        ``blind[i]``: the writer cannot see what item i meets, so nothing it cannot see may
        decide the item's fate in a way it could observe: an episodic item or a constraint
        becomes a memory of its own (never merged into, or found equal to, a stored one),
        and a repeat of a key's current value still records a new version. Trust still
        decides replace or pending.

        Every item's lock is taken first, in one statement and in name order (so two
        batches never wait on each other in a cycle). Items that meet what an earlier item
        of the batch wrote (the same key twice) go in a later round, after the earlier
        round's writes are sent. The writes are sent but their answers not awaited:
        ``finish`` checks them (the caller's next fetch would raise their errors anyway).
        """
        items = [await self._plan(d, b) for d, b in zip(drafts, blind, strict=True)]
        rounds: list[list[int]] = []
        seen: dict[str, int] = {}
        for i, item in enumerate(items):
            n = seen[item.lock] = seen.get(item.lock, -1) + 1
            if n == len(rounds):
                rounds.append([])
            rounds[n].append(i)
        results: list[WriteResult | None] = [None] * len(items)
        locks = sorted(seen)
        slices = Slices()  # sealing 100 items of 8 KiB text and 16 KiB data takes ~35 ms
        for batch in rounds:
            met = await self._look([items[i] for i in batch], locks)
            locks = []
            for i in batch:
                results[i] = await self._decide(items[i], met)
                await slices.give_way()
            await self._batch.flush(self._conn)
        return [r for r in results if r is not None]

    @property
    def enqueued(self) -> frozenset[str]:
        """The memories this writer queued index work for (pending until after commit)."""
        return frozenset(self._batch.enqueued)

    async def finish(self) -> None:
        """Wait for the answers of the writes sent, and check them."""
        await self._batch.check()

    async def _plan(self, draft: Draft, blind: bool) -> _Item:
        owner = "" if draft.scope is Scope.ORG else self._subject
        key = await self._key_for(owner)
        digest = key.text_digest(draft.text)
        session = draft.session_id if draft.scope is Scope.SESSION else ""
        lock = "\x1f".join((self._tenant, owner, session, draft.category.value, draft.key or digest.hex()))
        return _Item(draft, blind, owner, session, policy_for(draft.category), key, digest,
                     self._hasher.label(draft.key), lock)

    async def _look(self, items: list[_Item], locks: list[str]) -> dict[tuple[str, Any], list[dict[str, Any]]]:
        """Take ``locks`` (each writer of the same key or text of the same owner waits for
        the one before, so the check-then-write below cannot race), then read what the items
        meet, one statement per kind; rows by (kind, slot)."""
        conn = self._conn
        async with pipeline(conn):
            if locks:
                await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(n, 0)) FROM unnest(%s::text[]) AS n",
                                   (locks,))
            cursors = []
            for kind, query in _LOOK_UPS.items():
                asked = [i for i in items if i.looks == kind]
                if asked:
                    slots = [(*i.slot[:3], i.digest if kind == "repeat" else i.label) for i in asked]
                    columns = [list(c) for c in zip(*slots, strict=True)]
                    cursors.append((kind, await conn.execute(query, (self._tenant, *columns))))
            met: dict[tuple[str, Any], list[dict[str, Any]]] = {}
            for kind, cur in cursors:
                for row in await cur.fetchall():
                    last = row["text_hash"] if kind == "repeat" else row["key_label"]
                    slot = (row["subject"], row["session_id"], row["category"], bytes(last))
                    met.setdefault((kind, slot), []).append(row)
        return met

    async def _decide(self, item: _Item, met: dict[tuple[str, Any], list[dict[str, Any]]]) -> WriteResult:
        kind = item.looks
        if kind == "current":
            rows = met.get((kind, item.slot))
            return await self._replace(item, rows[0] if rows else None)
        if kind == "constraints":
            return self._accumulate(item, met.get((kind, item.slot), []))
        if kind == "repeat":
            rows = met.get((kind, (*item.slot[:3], item.digest)))
            return self._append(item, rows[0] if rows else None)
        return self._insert(item, "")

    async def _replace(self, item: _Item, row: dict[str, Any] | None) -> WriteResult:
        if row is None:
            return self._insert(item, "")
        draft = item.draft
        current = open_row(row, item.key)
        memory_id = str(current["id"])
        level, held = self._policy.trust_of(draft.source_kind), stored_trust(current)
        if not row["live"]:
            # No read serves a lapsed value (its validity or time to live ended): the new value
            # replaces it whatever it holds, and the values that waited on it go with it.
            self._batch.settle(memory_id, math.inf)
            return self._replace_current(current, draft, item.owner, item.key, item.digest, item.policy, level)
        if same_value(current, draft) and not item.blind:
            if level > held:  # confirmed by a more trusted source
                await self._conn.execute("UPDATE memories SET trust = %s WHERE tenant_id = %s AND id = %s",
                                         (level, self._tenant, memory_id))
            if level >= held:  # a confirmation settles what it outranks, as a replacement would
                self._batch.settle(memory_id, level)
            self._said_again(current, draft)
            return WriteResult(memory_id, Outcome.UNCHANGED, "same as the current value", current["version"])
        if level < held:
            # Never silently replace a more trusted value: keep this one pending beside it.
            await trust.hold(self._conn, item.key, memory_id, item.owner, draft, self._agent, level,
                             item.digest)
            await counters.bump(self._conn, {counters.CONFLICTS_PENDING: 1})
            return WriteResult(memory_id, Outcome.PENDING,
                               f"a {draft.source_kind.value} source (trust {level:g}) is trusted less than the current "
                               f"value's (trust {held:g}): kept as a pending value until a write of higher trust "
                               "or ResolveConflict settles it", current["version"])
        return self._replace_current(current, draft, item.owner, item.key, item.digest, item.policy, level)

    async def accept(self, current: dict[str, Any], draft: Draft, owner: str, level: float) -> WriteResult:
        """Make a pending value (``draft``, trusted ``level``) the current value of the locked
        row ``current`` (ResolveConflict); this writer's agent is the pending value's."""
        key = await self._key_for(owner)
        result = self._replace_current(open_row(current, key), draft, owner, key, key.text_digest(draft.text),
                                       policy_for(draft.category), level)
        await self._batch.flush(self._conn)
        await self.finish()
        return result

    def _replace_current(self, current: dict[str, Any], draft: Draft, owner: str, key: DataKey, digest: bytes,
                         policy: Policy, level: float) -> WriteResult:
        """Make ``draft`` (trusted ``level``) the current value of the locked, opened row
        ``current``; pending values trusted no more than it are settled."""
        memory_id = str(current["id"])
        if policy is Policy.VERSIONED:
            self._batch.close_fact(memory_id, draft.valid_from)
            outcome, change, reason = Outcome.VERSIONED, Change.VERSIONED, "new current value; the old one is kept as a dated version"
        else:
            outcome, change, reason = Outcome.UPDATED, Change.UPDATED, "last write wins; the old value is kept as a version"
        # The row is locked until commit: its next version is this one.
        self._batch.row(UPDATE_MEMORY, (*self._values(key, memory_id, draft, digest, level), self._tenant, memory_id))
        self._batch.settle(memory_id, level)
        self._batch.changed(owner, memory_id, change, (draft.key, draft.text))
        return WriteResult(memory_id, outcome, reason, int(current["version"]) + 1)

    def _accumulate(self, item: _Item, existing: list[dict[str, Any]]) -> WriteResult:
        for row in existing:
            if bytes(row["text_hash"]) == item.digest:
                self._said_again(row, item.draft)
                return WriteResult(str(row["id"]), Outcome.UNCHANGED, "this constraint is already recorded", row["version"])
        reason = f"kept alongside {len(existing)} other active constraint(s) with this key" if existing else ""
        return self._insert(item, reason)

    def _append(self, item: _Item, repeat: dict[str, Any] | None) -> WriteResult:
        if repeat is None:
            return self._insert(item, "")
        draft = item.draft
        memory_id = str(repeat["id"])
        # Merged tags stay within what the index can hold: the repeat's own tags first (the
        # latest report), then as many of the older ones as fit.
        merged = list(draft.tags) + [t for t in sorted(self._tags_of(item.key, repeat)) if t not in draft.tags]
        tags = sorted(merged[:CONTRACT.tags])
        turns = turn_values(joined_turns(source_turns(repeat), draft.source_turn_ids))
        self._batch.row(MERGE_REPEAT, (draft.importance, *self._tag_values(item.key, memory_id, tags), draft.pinned,
                                       self._agent, *turns, draft.pinned, self._ttl_seconds(draft), self._tenant,
                                       memory_id))
        self._batch.changed(item.owner, memory_id, Change.MERGED, None)
        return WriteResult(memory_id, Outcome.MERGED, "repeats an existing memory; merged into it",
                           int(repeat["version"]) + 1)

    async def merge_similar(self, draft: Draft, memory_id: str) -> WriteResult | None:
        """Merge an episodic draft into ``memory_id``, a near-duplicate found by meaning (the
        extraction pipeline's dedup): the text becomes the new one, importance the max, tags
        united; the old text stays as a version. None if that memory is no longer a live
        episodic memory of this subject and category, or if the two are dated differently
        (``different_dates``: two occasions, however alike) — the caller then writes the draft.
        The memory answers to the turns of both, the draft's first: they said its text."""
        owner = self._subject
        key = await self._key_for(owner)
        cur = await self._conn.execute(
            "SELECT id, text, text_ct, tags, tags_ct, source_turn_id, source_turn_ids FROM memories "
            "WHERE tenant_id = %s AND id = %s AND subject = %s "
            f"AND scope = 'subject' AND category = %s AND key_label = '\\x' AND {LIVE_NOW} FOR UPDATE",
            (self._tenant, memory_id, owner, draft.category.value),
        )
        row = await cur.fetchone()
        if row is None:
            return None
        stored = row["text"] if row["text_ct"] is None else key.open(memory_id, "text", bytes(row["text_ct"])).decode()
        if different_dates(draft.text, stored or ""):
            return None
        merged = list(draft.tags) + [t for t in sorted(self._tags_of(key, row)) if t not in draft.tags]
        cur = await self._conn.execute(
            "UPDATE memories SET text_ct = %s, text_hash = %s, text = NULL, importance = GREATEST(importance, %s), "
            "tags = '{}', tag_labels = %s, tags_ct = %s, agent = %s, source_kind = %s, source_turn_id = %s, "
            "source_turn_ids = %s, version = version + 1, updated_at = now() WHERE tenant_id = %s AND id = %s "
            "RETURNING version",
            (key.seal_text(memory_id, draft.text), key.text_digest(draft.text), draft.importance,
             *self._tag_values(key, memory_id, sorted(merged[:CONTRACT.tags])), self._agent, draft.source_kind.value,
             *turn_values(joined_turns(draft.source_turn_ids, source_turns(row))), self._tenant, memory_id),
        )
        updated = await cur.fetchone()
        assert updated is not None
        self._batch.changed(owner, memory_id, Change.MERGED, ("", draft.text))
        await self._batch.flush(self._conn)
        await self.finish()
        return WriteResult(memory_id, Outcome.MERGED, "says the same as an existing memory; merged into it",
                           updated["version"])

    def _insert(self, item: _Item, reason: str) -> WriteResult:
        # The id is made here, not by Postgres, because the ciphertext is bound to it.
        memory_id = str(uuid.uuid4())
        draft = item.draft
        self._batch.row(INSERT_MEMORY, (self._tenant, memory_id, item.owner, draft.scope.value, item.session,
                                        *self._values(item.key, memory_id, draft, item.digest), self._agent))
        self._batch.changed(item.owner, memory_id, Change.CREATED, (draft.key, draft.text))
        return WriteResult(memory_id, Outcome.CREATED, reason, 1)  # the column's default

    def _values(self, key: DataKey, memory_id: str, draft: Draft, digest: bytes,
                level: float | None = None) -> tuple[Any, ...]:
        return (
            draft.category.value,
            self._hasher.label(draft.key),
            key.seal_key(memory_id, draft.key),
            key.seal_text(memory_id, draft.text),
            digest,
            key.seal_data(memory_id, draft.data),
            draft.importance,
            draft.confidence,
            draft.stability.value,
            draft.pinned,
            *self._tag_values(key, memory_id, draft.tags),
            draft.valid_from,
            draft.valid_until,
            self._agent,
            draft.source_kind.value,
            *turn_values(draft.source_turn_ids),
            self._ttl_seconds(draft),
            self._policy.trust_of(draft.source_kind) if level is None else level,
        )

    def _said_again(self, row: dict[str, Any], draft: Draft) -> None:
        """The stored memory ``row`` was found to hold ``draft``'s value already: it answers to
        ``draft``'s turns as well (no new version: the value did not change)."""
        stored = source_turns(row)
        turns = joined_turns(stored, draft.source_turn_ids)
        if turns != stored:
            self._batch.row(ADD_TURNS, (*turn_values(turns), self._tenant, str(row["id"])))

    def _tag_values(self, key: DataKey, memory_id: str,
                    tags: tuple[str, ...] | list[str]) -> tuple[list[bytes], bytes | None]:
        """(tag_labels, tags_ct) of ``tags``: how tags are stored, never in the clear."""
        unique = sorted(set(tags))
        return [self._hasher.label(t) for t in unique], key.seal_tags(memory_id, unique)

    @staticmethod
    def _tags_of(key: DataKey, row: dict[str, Any]) -> tuple[str, ...]:
        """The tags of a locked row of this owner, opened (as stored, before 0012 sealed them)."""
        if row["tags_ct"] is None:
            return tuple(row["tags"])
        return key.open_tags(str(row["id"]), row["tags_ct"])

    def _ttl_seconds(self, draft: Draft) -> float | None:
        """How long a new or changed value lives (None: it does not expire). Counted from the
        change, not from reads: recalling a memory refreshes its recency, not its TTL."""
        if draft.pinned:
            return None
        ttl = self._policy.ttl(draft.category, session=draft.scope is Scope.SESSION)
        return None if ttl is None else ttl.total_seconds()
