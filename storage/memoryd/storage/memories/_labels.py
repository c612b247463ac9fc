"""A read filter's keys, tags and key patterns as stored labels (``FilterLabels``).

Keys and tags are stored only sealed and as keyed labels (migration 0012), so a filter is
compiled over labels: an exact key or tag is labelled directly; a view's glob (``billing_*``)
becomes the exact set of labels of the key names it matches among the memories of the
subjects the filter reads — opened with their data keys here, matched in Python with the
guard's own glob semantics, never handed to a store's pattern matcher. A memory written
after the set was made is simply not matched by this read (never one the glob excludes).

``KeyNames`` keeps the names it opened, by label: a label is a keyed hash of its name, so a
cached name is never wrong, and each read asks Postgres which labels exist now (an
index-only scan) and opens only those it has not seen. Names whose labels are gone (a purge)
are dropped at the subject's next resolution, and at once by a purge in this process.

Matching costs names × globs (each match bounded, ``Glob``): a view may hold 2,048 globs of
128 bytes and a subject any number of keys, so the matching is done in slices on the event
loop (``Slices``), never in one stretch that would hold every other call.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import replace

from cryptography.exceptions import InvalidTag
from psycopg.rows import tuple_row

from memoryd.domain import Category, FilterLabels, Glob, ReadFilter, Slices

from .._filters import Tenanted
from ..keys import SubjectKeys
from ..keywords import TermHasher
from ..postgres import TenantConn


def _is_glob(pattern: str) -> bool:
    return "*" in pattern


class _Subject:
    """One subject's opened key names by label, and what each glob matched among them."""

    def __init__(self, names: dict[bytes, str] | None = None) -> None:
        self.names: dict[bytes, str] = names or {}
        self.matches: dict[str, frozenset[str]] = {}  # glob -> labels (hex) of the names it matches

    async def match(self, patterns: Iterable[str], slices: Slices) -> None:
        """Match every name against each of ``patterns`` not matched yet."""
        for pattern in patterns:
            if pattern in self.matches:
                continue
            glob, found = Glob(pattern), []
            for label, name in self.names.items():  # never changed: a new set of names is a new _Subject
                if glob.matches(name):
                    found.append(label.hex())
                if slices.due():
                    await slices.give_way()
            self.matches[pattern] = frozenset(found)


class KeyNames:
    """The key names of subjects' memories, opened once per process (bounded, LRU)."""

    def __init__(self, keys: SubjectKeys, subjects: int = 1024) -> None:
        self._keys = keys
        self._size = subjects
        self._cache: OrderedDict[tuple[str, str], _Subject] = OrderedDict()

    async def matcher(self, conn: TenantConn, subjects: list[str],
                      patterns: Iterable[str]) -> Callable[[str], frozenset[str]]:
        """Labels (hex) of the key names of ``subjects``' memories (any status) each of the globs
        ``patterns`` matches. A name whose data key is gone is left out (its memories read as
        content_unavailable, so no glob can match them)."""
        tenant = conn.tenant
        async with conn.cursor(binary=True, row_factory=tuple_row) as cur:
            await cur.execute(
                "SELECT subject, key_label FROM memories WHERE tenant_id = %s AND subject = ANY(%s) "
                "AND key_label <> '\\x' GROUP BY subject, key_label",
                (tenant, subjects),
            )
            rows = await cur.fetchall()
        present: dict[str, set[bytes]] = {s: set() for s in subjects}
        for subject, label in rows:
            present[subject].add(label)
        held = []
        for subject, labels in present.items():
            entry = self._cache.pop((tenant, subject), None) or _Subject()
            if entry.names.keys() != labels:  # names came or went: keep what is still there
                names = {label: name for label, name in entry.names.items() if label in labels}
                unknown = labels - names.keys()
                entry = _Subject(names | (await self._open(conn, subject, sorted(unknown)) if unknown else {}))
            self._cache[(tenant, subject)] = entry
            held.append(entry)
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)
        slices = Slices()
        for entry in held:
            await entry.match(patterns, slices)
        return lambda pattern: frozenset().union(*(entry.matches[pattern] for entry in held))

    async def _open(self, conn: TenantConn, subject: str, labels: list[bytes]) -> dict[bytes, str]:
        tenant = conn.tenant
        key = (await self._keys.of(tenant).for_read(conn, {subject}))[subject]
        if key is None:
            return {}
        cur = await conn.execute(
            "SELECT DISTINCT ON (key_label) id, key_label, key_ct FROM memories WHERE tenant_id = %s "
            "AND subject = %s AND key_label = ANY(%b) AND key_ct IS NOT NULL",
            (tenant, subject, labels),
        )
        opened: dict[bytes, str] = {}
        for row in await cur.fetchall():
            try:
                opened[bytes(row["key_label"])] = key.open_key(str(row["id"]), row["key_ct"])
            except (InvalidTag, UnicodeDecodeError):
                continue
        return opened

    def evict(self, owner: Tenanted, subject: str) -> None:
        self._cache.pop((owner.tenant, subject), None)


def globs_of(flt: ReadFilter) -> set[str]:
    """The globs of ``flt``'s rules that need key names to be labelled: all but ``*`` alone,
    which allows the whole category."""
    return {p for _, patterns in flt.rules if "*" not in patterns for p in patterns if _is_glob(p)}


def needs_names(flt: ReadFilter) -> bool:
    """Whether labelling ``flt`` must read key names: one of its rules has a glob."""
    return bool(globs_of(flt))


def labels_for(flt: ReadFilter, label: Callable[[str], str], matching: Callable[[str], frozenset[str]]) -> FilterLabels:
    """The labels of ``flt``'s keys, tags and rules; ``matching(glob)`` gives the labels of
    the existing key names a glob matches (with the guard's glob semantics)."""
    rules: list[tuple[Category, tuple[str, ...] | None]] = []
    for category, patterns in flt.rules:
        if "*" in patterns or not patterns:
            rules.append((category, None))
            continue
        allowed = {label(p) for p in patterns if not _is_glob(p)}
        for pattern in filter(_is_glob, patterns):
            allowed |= matching(pattern)
            if Glob(pattern).matches(""):
                allowed.add(label(""))
        rules.append((category, tuple(sorted(allowed))))
    return FilterLabels(keys=tuple(label(k) for k in flt.keys), tags=tuple(label(t) for t in flt.tags),
                        rules=tuple(rules))


def _nothing(pattern: str) -> frozenset[str]:
    return frozenset()


async def label_filter(conn: TenantConn, names: KeyNames, hasher: TermHasher,
                       flt: ReadFilter) -> ReadFilter:
    """``flt`` with its labels; the same filter if it has them already. ``conn`` (the
    tenant's transaction) is used only if ``needs_names(flt)``."""
    if flt.labels is not None:
        return flt
    matching: Callable[[str], frozenset[str]] = _nothing
    if globs := globs_of(flt):
        subjects = sorted({flt.subject, ""} if flt.include_org else {flt.subject})
        matching = await names.matcher(conn, subjects, globs)
    return replace(flt, labels=labels_for(flt, lambda value: hasher.label(value).hex(), matching))
