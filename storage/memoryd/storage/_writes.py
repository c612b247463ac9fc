"""Write: the per-category conflict policies, applied to all items in one transaction."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from memoryd.domain import (
    Change,
    Draft,
    IdempotencyKeyReused,
    Outcome,
    Policy,
    Scope,
    TenantPolicy,
    WriteResult,
    policy_for,
)

from . import _counters as counters
from . import _trust as trust
from ._envelope import DataKey, open_row
from ._keywords import TermHasher, replace_terms
from ._milvus import MAX_TAGS
from ._rows import MEMORY_COLUMNS, same_value, stored_trust

_VERSION_COLUMNS = (
    "tenant_id, memory_id, version, change, subject, scope, session_id, category, key, text, data, "
    "text_ct, data_ct, key_label, key_ct, importance, confidence, stability, pinned, tags, tag_labels, tags_ct, "
    "valid_from, valid_until, agent, "
    "source_kind, source_turn_id, status, created_at, recorded_at, expires_at, trust"
)
_SNAPSHOT = (
    "SELECT tenant_id, id, version, %s, subject, scope, session_id, category, key, text, data, "
    "text_ct, data_ct, key_label, key_ct, importance, confidence, stability, pinned, tags, tag_labels, tags_ct, "
    "valid_from, valid_until, agent, "
    "source_kind, source_turn_id, status, created_at, updated_at, expires_at, trust FROM memories "
    "WHERE tenant_id = %s AND id = %s"
)


async def record_version(conn: psycopg.AsyncConnection, tenant: str, memory_id: str, change: Change) -> None:
    """Snapshot the memory's current row as a version, and mark older versions superseded.

    The version keeps the memory's ciphertext and labels as they are: it was sealed for the
    same memory id and field, so the subject's data key opens it there too.
    """
    await conn.execute(
        "UPDATE memory_versions SET status = 'superseded' "
        "WHERE tenant_id = %s AND memory_id = %s AND status = 'active'",
        (tenant, memory_id),
    )
    await conn.execute(
        f"INSERT INTO memory_versions ({_VERSION_COLUMNS}) {_SNAPSHOT}", (change.value, tenant, memory_id)
    )


async def enqueue_index(conn: psycopg.AsyncConnection, tenant: str, memory_id: str, subject: str, op: str) -> None:
    """Queue index work for the outbox worker, folding the memory's earlier pending rows.

    Rows a worker holds are skipped, not waited for: a write never waits for a batch of
    embeddings. The worker re-reads the current row, so a row left over is harmless.
    """
    await conn.execute(
        "DELETE FROM outbox WHERE tenant_id = %s AND id IN (SELECT id FROM outbox WHERE tenant_id = %s "
        "AND memory_id = %s AND attempts = 0 AND NOT dead FOR UPDATE SKIP LOCKED)",
        (tenant, tenant, memory_id),
    )
    await conn.execute(
        "INSERT INTO outbox (tenant_id, memory_id, subject, op) VALUES (%s, %s, %s, %s)",
        (tenant, memory_id, subject, op),
    )


@dataclass(frozen=True)
class Written:
    """What a Write did: each item's result, and the ids among them whose index work was
    still queued (pending or dead) when the write committed."""

    results: list[WriteResult]
    unindexed: frozenset[str]


async def unindexed(conn: psycopg.AsyncConnection, tenant: str, results: list[WriteResult]) -> frozenset[str]:
    """The ids of ``results`` that have outbox rows (pending or dead), in the caller's transaction."""
    ids = sorted({r.memory_id for r in results if r.memory_id})
    if not ids:
        return frozenset()
    cur = await conn.execute(
        "SELECT DISTINCT memory_id FROM outbox WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[])", (tenant, ids)
    )
    return frozenset(str(r["memory_id"]) for r in await cur.fetchall())


async def claim_idempotency(
    conn: psycopg.AsyncConnection, tenant: str, agent: str, key: str, request_hash: bytes
) -> list[WriteResult] | None:
    """Claim ``key`` for this request; return the first response if a retry, else None.

    A concurrent first attempt holds the key's row lock until it commits, so a retry waits for
    it and then reads its response.
    """
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
    return [
        WriteResult(memory_id=r["memory_id"], outcome=Outcome(r["outcome"]), reason=r["reason"], version=r["version"])
        for r in row["response"]
    ]


async def store_idempotent_response(
    conn: psycopg.AsyncConnection, tenant: str, agent: str, key: str, results: list[WriteResult]
) -> None:
    payload = [
        {"memory_id": r.memory_id, "outcome": r.outcome.value, "reason": r.reason, "version": r.version}
        for r in results
    ]
    await conn.execute(
        "UPDATE idempotency_keys SET response = %s WHERE tenant_id = %s AND agent = %s AND key = %s",
        (Jsonb(payload), tenant, agent, key),
    )


KeyFor = Callable[[str], Awaitable[DataKey]]


class ItemWriter:
    """Applies one item's conflict policy inside the caller's transaction.

    ``key_for(owner)`` gives the data key of the memory's owner (the subject, or '' for the
    organisation), locked for the rest of the transaction; text and data are stored only
    sealed with it.
    """

    def __init__(self, conn: psycopg.AsyncConnection, tenant: str, agent: str, subject: str,
                 hasher: TermHasher, key_for: KeyFor, policy: TenantPolicy = TenantPolicy()) -> None:
        self._conn = conn
        self._policy = policy
        self._tenant = tenant
        self._agent = agent
        self._subject = subject
        self._hasher = hasher
        self._key_for = key_for
        self._key: DataKey | None = None

    async def write(self, draft: Draft, *, blind: bool = False) -> WriteResult:
        """Apply ``draft``'s category policy. ``blind``: the writer cannot see what the item
        meets, so nothing it cannot see may decide the item's fate in a way it could
        observe: an episodic item or a constraint becomes a memory of its own (never merged
        into, or found equal to, a stored one), and a repeat of a key's current value still
        records a new version. Trust still decides replace or pending."""
        owner = "" if draft.scope is Scope.ORG else self._subject
        session = draft.session_id if draft.scope is Scope.SESSION else ""
        policy = policy_for(draft.category)
        self._key = await self._key_for(owner)
        digest = self._key.text_digest(draft.text)
        # Serialise writers of the same key (or, unkeyed, the same text) of the same owner,
        # so the check-then-write below cannot race.
        lock_name = draft.key or digest.hex()
        await self._conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            ("\x1f".join((self._tenant, owner, session, draft.category.value, lock_name)),),
        )
        if draft.key and policy in (Policy.LAST_WRITE_WINS, Policy.VERSIONED):
            return await self._replace(draft, owner, session, digest, policy, blind)
        if blind:
            return await self._insert(draft, owner, session, digest, "")
        if draft.key:
            return await self._accumulate(draft, owner, session, digest)
        return await self._append(draft, owner, session, digest)

    async def _replace(self, draft: Draft, owner: str, session: str, digest: bytes, policy: Policy,
                       blind: bool = False) -> WriteResult:
        cur = await self._conn.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE tenant_id = %s AND subject = %s AND session_id = %s "
            "AND category = %s AND key_label = %s AND status = 'active' FOR UPDATE",
            (self._tenant, owner, session, draft.category.value, self._hasher.label(draft.key)),
        )
        row = await cur.fetchone()
        if row is None:
            return await self._insert(draft, owner, session, digest, "")
        current = open_row(row, self._key)
        memory_id = str(current["id"])
        level, held = self._policy.trust_of(draft.source_kind), stored_trust(current)
        if same_value(current, draft) and not blind:
            if level > held:  # confirmed by a more trusted source
                await self._conn.execute("UPDATE memories SET trust = %s WHERE tenant_id = %s AND id = %s",
                                         (level, self._tenant, memory_id))
            if level >= held:  # a confirmation settles what it outranks, as a replacement would
                await self._settle(memory_id, level)
            return WriteResult(memory_id, Outcome.UNCHANGED, "same as the current value", current["version"])
        if level < held:
            # Never silently replace a more trusted value: keep this one pending beside it.
            await trust.hold(self._conn, self._tenant, self._key, memory_id, owner, draft, self._agent, level, digest)
            await counters.bump(self._conn, self._tenant, counters.CONFLICTS_PENDING)
            return WriteResult(memory_id, Outcome.PENDING,
                               f"a {draft.source_kind.value} source (trust {level:g}) is trusted less than the current "
                               f"value's (trust {held:g}): kept as a pending value until a write of higher trust "
                               "or ResolveConflict settles it", current["version"])
        return await self.replace_current(current, draft, owner, digest, policy, level)

    async def accept(self, current: dict[str, Any], draft: Draft, owner: str, level: float) -> WriteResult:
        """Make a pending value (``draft``, trusted ``level``) the current value of the locked
        row ``current`` (ResolveConflict); this writer's agent is the pending value's."""
        self._key = await self._key_for(owner)
        return await self.replace_current(open_row(current, self._key), draft, owner,
                                          self._key.text_digest(draft.text), policy_for(draft.category), level)

    async def _settle(self, memory_id: str, level: float) -> None:
        await counters.bump(self._conn, self._tenant, counters.CONFLICTS_SETTLED,
                            await trust.settle(self._conn, self._tenant, memory_id, level))

    async def replace_current(self, current: dict[str, Any], draft: Draft, owner: str, digest: bytes,
                              policy: Policy, level: float) -> WriteResult:
        """Make ``draft`` (trusted ``level``) the current value of the locked, opened row
        ``current``; pending values trusted no more than it are settled."""
        memory_id = str(current["id"])
        if policy is Policy.VERSIONED:
            # The old fact stays as a dated version: its validity ends where the new one starts.
            await self._conn.execute(
                "UPDATE memory_versions SET valid_until = LEAST(COALESCE(valid_until, 'infinity'), COALESCE(%s, now())) "
                "WHERE tenant_id = %s AND memory_id = %s AND status = 'active'",
                (draft.valid_from, self._tenant, memory_id),
            )
            outcome, change, reason = Outcome.VERSIONED, Change.VERSIONED, "new current value; the old one is kept as a dated version"
        else:
            outcome, change, reason = Outcome.UPDATED, Change.UPDATED, "last write wins; the old value is kept as a version"
        version = await self._update(memory_id, draft, digest, level)
        await self._settle(memory_id, level)
        await replace_terms(self._conn, self._tenant, owner, memory_id, draft.key, draft.text, self._hasher)
        await record_version(self._conn, self._tenant, memory_id, change)
        await enqueue_index(self._conn, self._tenant, memory_id, owner, "upsert")
        return WriteResult(memory_id, outcome, reason, version)

    async def _accumulate(self, draft: Draft, owner: str, session: str, digest: bytes) -> WriteResult:
        cur = await self._conn.execute(
            "SELECT id, version, text_hash FROM memories WHERE tenant_id = %s AND subject = %s AND session_id = %s "
            "AND category = %s AND key_label = %s AND status = 'active'",
            (self._tenant, owner, session, draft.category.value, self._hasher.label(draft.key)),
        )
        existing = await cur.fetchall()
        for row in existing:
            if bytes(row["text_hash"]) == digest:
                return WriteResult(str(row["id"]), Outcome.UNCHANGED, "this constraint is already recorded", row["version"])
        reason = f"kept alongside {len(existing)} other active constraint(s) with this key" if existing else ""
        return await self._insert(draft, owner, session, digest, reason)

    async def _append(self, draft: Draft, owner: str, session: str, digest: bytes) -> WriteResult:
        cur = await self._conn.execute(
            "SELECT id, importance, tags, tags_ct, pinned FROM memories WHERE tenant_id = %s AND subject = %s "
            "AND session_id = %s AND category = %s AND key_label = '\\x' AND text_hash = %s AND status = 'active' "
            "ORDER BY updated_at DESC LIMIT 1 FOR UPDATE",
            (self._tenant, owner, session, draft.category.value, digest),
        )
        repeat = await cur.fetchone()
        if repeat is None:
            return await self._insert(draft, owner, session, digest, "")
        memory_id = str(repeat["id"])
        # Merged tags stay within what the index can hold: the repeat's own tags first (the
        # latest report), then as many of the older ones as fit.
        merged = list(draft.tags) + [t for t in sorted(self._tags_of(repeat)) if t not in draft.tags]
        tags = sorted(merged[:MAX_TAGS])
        cur = await self._conn.execute(
            "UPDATE memories SET importance = GREATEST(importance, %s), tags = '{}', tag_labels = %s, tags_ct = %s, "
            "pinned = pinned OR %s, agent = %s, version = version + 1, updated_at = now(), "
            "expires_at = CASE WHEN pinned OR %s THEN NULL ELSE now() + %s::float8 * interval '1 second' END "
            "WHERE tenant_id = %s AND id = %s RETURNING version",
            (draft.importance, *self._tag_values(memory_id, tags), draft.pinned, self._agent, draft.pinned,
             self._ttl_seconds(draft), self._tenant, memory_id),
        )
        row = await cur.fetchone()
        assert row is not None
        await record_version(self._conn, self._tenant, memory_id, Change.MERGED)
        await enqueue_index(self._conn, self._tenant, memory_id, owner, "upsert")
        return WriteResult(memory_id, Outcome.MERGED, "repeats an existing memory; merged into it", row["version"])

    async def merge_similar(self, draft: Draft, memory_id: str) -> WriteResult | None:
        """Merge an episodic draft into ``memory_id``, a near-duplicate found by meaning (the
        extraction pipeline's dedup): the text becomes the new one, importance the max, tags
        united; the old text stays as a version. None if that memory is no longer an active
        episodic memory of this subject and category (the caller then writes the draft)."""
        owner = self._subject
        self._key = await self._key_for(owner)
        cur = await self._conn.execute(
            "SELECT id, tags, tags_ct FROM memories WHERE tenant_id = %s AND id = %s AND subject = %s "
            "AND scope = 'subject' AND category = %s AND key_label = '\\x' AND status = 'active' FOR UPDATE",
            (self._tenant, memory_id, owner, draft.category.value),
        )
        row = await cur.fetchone()
        if row is None:
            return None
        merged = list(draft.tags) + [t for t in sorted(self._tags_of(row)) if t not in draft.tags]
        cur = await self._conn.execute(
            "UPDATE memories SET text_ct = %s, text_hash = %s, text = NULL, importance = GREATEST(importance, %s), "
            "tags = '{}', tag_labels = %s, tags_ct = %s, agent = %s, source_kind = %s, source_turn_id = %s, "
            "version = version + 1, updated_at = now() WHERE tenant_id = %s AND id = %s RETURNING version",
            (self._key.seal_text(memory_id, draft.text), self._key.text_digest(draft.text), draft.importance,
             *self._tag_values(memory_id, sorted(merged[:MAX_TAGS])), self._agent, draft.source_kind.value, draft.source_turn_id,
             self._tenant, memory_id),
        )
        updated = await cur.fetchone()
        assert updated is not None
        await replace_terms(self._conn, self._tenant, owner, memory_id, "", draft.text, self._hasher)
        await record_version(self._conn, self._tenant, memory_id, Change.MERGED)
        await enqueue_index(self._conn, self._tenant, memory_id, owner, "upsert")
        return WriteResult(memory_id, Outcome.MERGED, "says the same as an existing memory; merged into it",
                           updated["version"])

    async def _insert(self, draft: Draft, owner: str, session: str, digest: bytes, reason: str) -> WriteResult:
        # The id is made here, not by Postgres, because the ciphertext is bound to it.
        memory_id = str(uuid.uuid4())
        cur = await self._conn.execute(
            "INSERT INTO memories (tenant_id, id, subject, scope, session_id, category, key_label, key_ct, text_ct, "
            "text_hash, data_ct, importance, confidence, stability, pinned, tag_labels, tags_ct, valid_from, "
            "valid_until, agent, source_kind, source_turn_id, expires_at, trust) VALUES (%s, %s, %s, %s, %s, %s, %s, "
            "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
            "now() + %s::float8 * interval '1 second', %s) RETURNING version",
            (self._tenant, memory_id, owner, draft.scope.value, session, *self._values(memory_id, draft, digest)),
        )
        row = await cur.fetchone()
        assert row is not None
        await replace_terms(self._conn, self._tenant, owner, memory_id, draft.key, draft.text, self._hasher)
        await record_version(self._conn, self._tenant, memory_id, Change.CREATED)
        await enqueue_index(self._conn, self._tenant, memory_id, owner, "upsert")
        return WriteResult(memory_id, Outcome.CREATED, reason, row["version"])

    async def _update(self, memory_id: str, draft: Draft, digest: bytes, level: float) -> int:
        cur = await self._conn.execute(
            "UPDATE memories SET category = %s, key_label = %s, key_ct = %s, text_ct = %s, text_hash = %s, "
            "data_ct = %s, key = '', text = NULL, data = NULL, tags = '{}', importance = %s, confidence = %s, "
            "stability = %s, pinned = %s, tag_labels = %s, tags_ct = %s, valid_from = %s, valid_until = %s, "
            "agent = %s, source_kind = %s, source_turn_id = %s, "
            "expires_at = now() + %s::float8 * interval '1 second', trust = %s, version = version + 1, "
            "updated_at = now() WHERE tenant_id = %s AND id = %s RETURNING version",
            (*self._values(memory_id, draft, digest, level), self._tenant, memory_id),
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row["version"])

    def _values(self, memory_id: str, draft: Draft, digest: bytes, level: float | None = None) -> tuple[Any, ...]:
        assert self._key is not None
        return (
            draft.category.value,
            self._hasher.label(draft.key),
            self._key.seal_key(memory_id, draft.key),
            self._key.seal_text(memory_id, draft.text),
            digest,
            self._key.seal_data(memory_id, draft.data),
            draft.importance,
            draft.confidence,
            draft.stability.value,
            draft.pinned,
            *self._tag_values(memory_id, draft.tags),
            draft.valid_from,
            draft.valid_until,
            self._agent,
            draft.source_kind.value,
            draft.source_turn_id,
            self._ttl_seconds(draft),
            self._policy.trust_of(draft.source_kind) if level is None else level,
        )

    def _tag_values(self, memory_id: str, tags: tuple[str, ...] | list[str]) -> tuple[list[bytes], bytes | None]:
        """(tag_labels, tags_ct) of ``tags``: how tags are stored, never in the clear."""
        assert self._key is not None
        unique = sorted(set(tags))
        return [self._hasher.label(t) for t in unique], self._key.seal_tags(memory_id, unique)

    def _tags_of(self, row: dict[str, Any]) -> tuple[str, ...]:
        """The tags of a locked row of this owner, opened (as stored, before 0012 sealed them)."""
        assert self._key is not None
        if row["tags_ct"] is None:
            return tuple(row["tags"])
        return self._key.open_tags(str(row["id"]), row["tags_ct"])

    def _ttl_seconds(self, draft: Draft) -> float | None:
        """How long a new or changed value lives (None: it does not expire). Counted from the
        change, not from reads: recalling a memory refreshes its recency, not its TTL."""
        if draft.pinned:
            return None
        ttl = self._policy.ttl(draft.category, session=draft.scope is Scope.SESSION)
        return None if ttl is None else ttl.total_seconds()
