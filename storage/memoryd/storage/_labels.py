"""A read filter's keys, tags and key patterns as stored labels (``FilterLabels``).

Keys and tags are stored only sealed and as keyed labels (migration 0012), so a filter is
compiled over labels: an exact key or tag is labelled directly; a view's glob (``billing_*``)
becomes the exact set of labels of the key names it matches among the memories of the
subjects the filter reads — opened with their data keys here, matched in Python with the
guard's own glob semantics, never handed to a store's pattern matcher. A memory written
after the set was made is simply not matched by this read (never one the glob excludes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from cryptography.exceptions import InvalidTag

from memoryd.domain import Category, FilterLabels, ReadFilter, glob_to_regex

from ._envelope import SubjectKeys
from ._keywords import TermHasher


def _is_glob(pattern: str) -> bool:
    return "*" in pattern


async def key_names(conn: Any, keys: SubjectKeys, tenant: str, subjects: list[str]) -> set[str]:
    """The distinct key names of the memories of ``subjects`` (any status), opened."""
    cur = await conn.execute(
        "SELECT DISTINCT ON (subject, key_label) id, subject, key_ct FROM memories "
        "WHERE tenant_id = %s AND subject = ANY(%s) AND key_label <> '\\x' AND key_ct IS NOT NULL",
        (tenant, subjects),
    )
    rows = await cur.fetchall()
    opened = await keys.for_read(conn, tenant, {r["subject"] for r in rows})
    names: set[str] = set()
    for row in rows:
        key = opened.get(row["subject"])
        if key is None:
            continue  # its memories read as content_unavailable: no key name to match
        try:
            names.add(key.open_key(str(row["id"]), row["key_ct"]))
        except (InvalidTag, UnicodeDecodeError):
            continue
    return names


def needs_names(flt: ReadFilter) -> bool:
    """Whether labelling ``flt`` must read key names: one of its rules has a glob (other
    than ``*`` alone, which allows the whole category)."""
    return any(_is_glob(p) for _, patterns in flt.rules if "*" not in patterns for p in patterns)


def labels_for(flt: ReadFilter, label: Callable[[str], str], names: set[str]) -> FilterLabels:
    """The labels of ``flt``'s keys, tags and rules; a rule's globs are matched against
    ``names`` (the key names that exist) with the guard's glob semantics."""
    rules: list[tuple[Category, tuple[str, ...] | None]] = []
    for category, patterns in flt.rules:
        if "*" in patterns or not patterns:
            rules.append((category, None))
            continue
        allowed = {p for p in patterns if not _is_glob(p)}
        for pattern in filter(_is_glob, patterns):
            matcher = glob_to_regex(pattern)
            allowed |= {n for n in names | {""} if matcher.fullmatch(n)}
        rules.append((category, tuple(sorted(label(n) for n in allowed))))
    return FilterLabels(keys=tuple(label(k) for k in flt.keys), tags=tuple(label(t) for t in flt.tags),
                        rules=tuple(rules))


async def label_filter(conn: Any, keys: SubjectKeys, hasher: TermHasher, tenant: str,
                       flt: ReadFilter) -> ReadFilter:
    """``flt`` with its labels; the same filter if it has them already. ``conn`` (the
    tenant's transaction) is used only if ``needs_names(flt)``."""
    if flt.labels is not None:
        return flt
    names: set[str] = set()
    if needs_names(flt):
        names = await key_names(conn, keys, tenant, sorted({flt.subject, ""} if flt.include_org else {flt.subject}))
    return replace(flt, labels=labels_for(flt, lambda value: hasher.label(value).hex(), names))
