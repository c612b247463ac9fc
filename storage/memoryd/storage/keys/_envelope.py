"""Envelope encryption of memory content with per-subject data keys.

Every (tenant, subject) has one random 256-bit data key (the organisation's memories use
subject ''), stored only wrapped by the tenant key of a ``KeyProvider``, in ``subject_keys``
(migration 0007). A memory's text and data are sealed with AES-GCM under it:

    nonce(12) ‖ AES-GCM(data key, nonce, plaintext, aad = tenant \\0 subject \\0 memory id \\0 field)

so a ciphertext moved to another row, memory, subject or field does not decrypt. The
dedup digest (``text_hash``) is an HMAC under a key derived from the data key: it cannot be
checked against a dictionary, and after the data key is destroyed nothing links it to a text.

Destroying a subject's key row (PURGE of the whole subject) is crypto-shredding: copies of
its memory rows left anywhere (a backup or replica without the key row, a dump, a dead
letter) can no longer be decrypted.

Unwrapped keys are cached in-process, keyed by the *wrapped* bytes' digest, so a key row
that was destroyed or replaced is never served from the cache: every use reads the row.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from memoryd.domain import DataKeyUnavailable, KeyProvider, Slices, sliced

DATA_KEY_BYTES = 32
NONCE_BYTES = 12
_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """The form repeats are compared in: case-folded, whitespace collapsed."""
    return _SPACE.sub(" ", text.strip()).casefold()


def legacy_digest(text: str) -> bytes:
    """The unkeyed dedup digest of rows written before encryption (replaced by the backfill)."""
    return hashlib.sha256(normalise(text).encode()).digest()


class DataKey:
    """One subject's unwrapped data key: seals and opens that subject's memory fields."""

    def __init__(self, tenant: str, subject: str, key: bytes) -> None:
        self.tenant = tenant
        self.subject = subject
        self._aead = AESGCM(key)
        self._digest_key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                                info=b"memoryd text digest v1").derive(key)

    def _aad(self, memory_id: str, field: str) -> bytes:
        return "\x00".join((self.tenant, self.subject, str(memory_id), field)).encode()

    def seal(self, memory_id: str, field: str, plaintext: bytes) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, plaintext, self._aad(memory_id, field))

    def open(self, memory_id: str, field: str, sealed: bytes) -> bytes:
        """The plaintext; raises ``InvalidTag`` if the bytes were not sealed here for this field."""
        if len(sealed) <= NONCE_BYTES:
            raise InvalidTag()
        return self._aead.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], self._aad(memory_id, field))

    def seal_text(self, memory_id: str, text: str) -> bytes:
        return self.seal(memory_id, "text", text.encode())

    def seal_data(self, memory_id: str, data: dict[str, Any] | None) -> bytes | None:
        if data is None:
            return None
        return self.seal(memory_id, "data", json.dumps(data, sort_keys=True, separators=(",", ":")).encode())

    def seal_key(self, memory_id: str, key: str) -> bytes | None:
        return self.seal(memory_id, "key", key.encode()) if key else None

    def seal_tags(self, memory_id: str, tags: tuple[str, ...] | list[str]) -> bytes | None:
        return self.seal(memory_id, "tags", json.dumps(sorted(set(tags))).encode()) if tags else None

    def open_key(self, memory_id: str, sealed: bytes | None) -> str:
        return self.open(memory_id, "key", bytes(sealed)).decode() if sealed is not None else ""

    def open_tags(self, memory_id: str, sealed: bytes | None) -> tuple[str, ...]:
        return tuple(json.loads(self.open(memory_id, "tags", bytes(sealed)))) if sealed is not None else ()

    def text_digest(self, text: str) -> bytes:
        """Keyed digest of the normalised text, used to find repeats of this subject."""
        return hmac.new(self._digest_key, normalise(text).encode(), hashlib.sha256).digest()


def open_row(row: dict[str, Any], key: DataKey | None, id_column: str = "id") -> dict[str, Any]:
    """``row`` with its ``text``, ``data``, ``key`` and ``tags`` in the clear, or marked
    ``content_unavailable``.

    Columns of a row written before encryption (no ``text_ct``; no ``key_ct``/``tags_ct``
    before migration 0012) are read as stored. A sealed row whose key is missing or does not
    open it gets text "", data None, key "" and no tags — never ciphertext.
    """
    out = dict(row)
    out["content_unavailable"] = False
    sealed = [row.get(c) for c in ("text_ct", "data_ct", "key_ct", "tags_ct")]
    if all(s is None for s in sealed):
        return out
    text_ct, data_ct, key_ct, tags_ct = sealed
    memory_id = str(row[id_column])
    try:
        if key is None:
            raise InvalidTag()
        if text_ct is not None or data_ct is not None:
            out["text"] = key.open(memory_id, "text", bytes(text_ct)).decode() if text_ct is not None else ""
            out["data"] = json.loads(key.open(memory_id, "data", bytes(data_ct))) if data_ct is not None else None
        if key_ct is not None:
            out["key"] = key.open_key(memory_id, key_ct)
        if tags_ct is not None:
            out["tags"] = key.open_tags(memory_id, tags_ct)
    except (InvalidTag, UnicodeDecodeError, ValueError):
        out.update(text="", data=None, key="", tags=(), content_unavailable=True)
    return out


# The subject's wrapped data key beside each row of ``memories`` (SubjectKeys.open_with_keys).
WRAPPED_KEY_COLUMN = ("(SELECT k.wrapped FROM subject_keys k WHERE k.tenant_id = memories.tenant_id "
                      "AND k.subject = memories.subject) AS wrapped_key")


class SubjectKeys:
    """Subjects' key rows, through one tenant's key ring (``of``), and the unwrapped keys'
    cache they share."""

    def __init__(self, provider: KeyProvider, cache_size: int = 4096) -> None:
        self._provider = provider
        self._cache_size = cache_size
        self._cache: OrderedDict[tuple[str, str, bytes], DataKey] = OrderedDict()

    def of(self, tenant: str) -> TenantKeys:
        """``tenant``'s key ring: reads, creates and destroys that tenant's subjects' key rows."""
        return TenantKeys(self, tenant)


@dataclass(frozen=True)
class TenantKeys:
    """One tenant's subjects' key rows (``SubjectKeys.of``), read in that tenant's transaction."""

    ring: SubjectKeys
    tenant: str

    async def _unwrap(self, subject: str, wrapped: bytes) -> DataKey:
        ring, tenant = self.ring, self.tenant
        slot = (tenant, subject, hashlib.sha256(wrapped).digest())
        key = ring._cache.get(slot)
        if key is not None:
            ring._cache.move_to_end(slot)
            return key
        key = DataKey(tenant, subject, await ring._provider.unwrap(tenant, subject, wrapped))
        ring._cache[slot] = key
        if len(ring._cache) > ring._cache_size:
            ring._cache.popitem(last=False)
        return key

    async def for_write(self, conn: Any, subject: str) -> DataKey:
        """The subject's data key, created if it has none, in the caller's transaction.

        The row is read ``FOR SHARE`` and stays locked until commit, so a PURGE of the
        subject (which deletes the row) waits for this write, or this write waits for it and
        then makes a fresh key. Raises ``DataKeyUnavailable`` if the key cannot be unwrapped.
        """
        for _ in range(3):
            cur = await conn.execute(
                "SELECT wrapped FROM subject_keys WHERE tenant_id = %s AND subject = %s FOR SHARE",
                (self.tenant, subject),
            )
            row = await cur.fetchone()
            if row is not None:
                return await self._unwrap(subject, bytes(row["wrapped"]))
            fresh = os.urandom(DATA_KEY_BYTES)
            wrapped = await self.ring._provider.wrap(self.tenant, subject, fresh)
            cur = await conn.execute(
                "INSERT INTO subject_keys (tenant_id, subject, wrapped, key_id) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT DO NOTHING RETURNING subject",
                (self.tenant, subject, wrapped, self.ring._provider.key_id),
            )
            if await cur.fetchone() is not None:
                return await self._unwrap(subject, wrapped)
            # A concurrent writer created it first: read theirs (FOR SHARE, next round).
        raise DataKeyUnavailable("the data key of this subject is being replaced; retry")

    async def for_read(self, conn: Any, subjects: set[str]) -> dict[str, DataKey | None]:
        """The data keys of ``subjects`` that exist and unwrap; None for the others."""
        keys: dict[str, DataKey | None] = dict.fromkeys(subjects)
        if not subjects:
            return keys
        cur = await conn.execute(
            "SELECT subject, wrapped FROM subject_keys WHERE tenant_id = %s AND subject = ANY(%s)",
            (self.tenant, sorted(subjects)),
        )
        for row in await cur.fetchall():
            try:
                keys[row["subject"]] = await self._unwrap(row["subject"], bytes(row["wrapped"]))
            except DataKeyUnavailable:
                pass  # its memories read as content_unavailable; everything else is unaffected
        return keys

    async def open_rows(self, conn: Any, rows: list[dict[str, Any]],
                        id_column: str = "id") -> list[dict[str, Any]]:
        """Decrypt ``rows`` (each with subject, text, data, text_ct, data_ct) in the caller's
        transaction, in slices (``Slices``: 500 rows of large memories take ~25 ms)."""
        sealed = {r["subject"] for r in rows
                  if any(r.get(c) is not None for c in ("text_ct", "data_ct", "key_ct", "tags_ct"))}
        keys = await self.for_read(conn, sealed)
        return await sliced(rows, lambda r: open_row(r, keys.get(r["subject"]), id_column))

    async def open_with_keys(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Decrypt ``rows`` that carry their subject's wrapped key in ``wrapped_key`` (read in
        the same statement, ``WRAPPED_KEY_COLUMN``): no second query for the keys. A row whose
        key row is gone (crypto-shredded) or does not unwrap reads as content_unavailable."""
        keys: dict[tuple[str, bytes], DataKey | None] = {}
        opened = []
        slices = Slices()
        for row in rows:
            wrapped = row.pop("wrapped_key", None)
            key = None
            if wrapped is not None:
                slot = (row["subject"], bytes(wrapped))
                if slot not in keys:
                    try:
                        keys[slot] = await self._unwrap(row["subject"], slot[1])
                    except DataKeyUnavailable:
                        keys[slot] = None
                key = keys[slot]
            opened.append(open_row(row, key))
            await slices.give_way()
        return opened

    async def destroy(self, conn: Any, subject: str) -> int:
        """Delete the subject's key row (crypto-shredding) and drop it from the cache."""
        cur = await conn.execute("DELETE FROM subject_keys WHERE tenant_id = %s AND subject = %s",
                                 (self.tenant, subject))
        self.evict(subject)
        return int(cur.rowcount)

    def evict(self, subject: str) -> None:
        cache = self.ring._cache
        for slot in [s for s in cache if s[0] == self.tenant and s[1] == subject]:
            del cache[slot]
