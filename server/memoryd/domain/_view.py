"""Views: what one agent may read, write and erase, and which fields it receives."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._model import Category, SourceKind

# The Memory fields a view can make visible (names of memoryd.v1.Memory fields).
MEMORY_FIELDS = frozenset({
    "id", "subject", "scope", "session_id", "category", "key", "text", "data", "importance",
    "confidence", "stability", "pinned", "tags", "valid_from", "valid_until", "provenance",
    "version", "status", "created_at", "updated_at", "access_count", "last_access_at", "expires_at", "trust",
    "pending",
})


class Glob:
    """A view's key pattern: ``*`` matches any run of characters (none, and newlines, too);
    every other character matches only itself, case and all.

    Matched without backtracking: the text before the first ``*`` must begin the key, the text
    after the last must end it, and each piece between is taken at its first occurrence after
    the previous one — if any placement of the pieces fits, the leftmost does, as it leaves the
    most room for the rest. Each piece is looked for once (``str.find``), so a match costs
    O(len(key) · len(pattern)) at worst: under 10 µs at the contract's 128 bytes each
    (bench/RESULTS.md), where the regular expression this replaced backtracked for seconds on
    ``*a*a*a*…*b`` against ``aaa…a``.
    """

    __slots__ = ("pattern", "_exact", "_prefix", "_pieces", "_suffix", "_least")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        prefix, *rest = pattern.split("*")
        self._exact = not rest
        self._prefix = prefix
        self._suffix = rest.pop() if rest else ""
        self._pieces = tuple(piece for piece in rest if piece)  # ``**`` is ``*``
        self._least = len(prefix) + len(self._suffix) + sum(map(len, self._pieces))

    def matches(self, key: str) -> bool:
        if self._exact:
            return key == self.pattern
        if len(key) < self._least or not key.startswith(self._prefix) or not key.endswith(self._suffix):
            return False
        at, end = len(self._prefix), len(key) - len(self._suffix)
        for piece in self._pieces:
            at = key.find(piece, at, end)
            if at < 0:
                return False
            at += len(piece)
        return True

    def __repr__(self) -> str:
        return f"Glob({self.pattern!r})"


@dataclass(frozen=True)
class ViewRule:
    """Allows one category, for keys matching any of the patterns."""

    category: Category
    key_patterns: tuple[str, ...] = ("*",)
    globs: tuple[Glob, ...] = field(init=False, repr=False, compare=False)  # compiled once

    def __post_init__(self) -> None:
        object.__setattr__(self, "globs", tuple(Glob(p) for p in self.key_patterns))

    def allows(self, category: Category, key: str) -> bool:
        return category is self.category and any(glob.matches(key) for glob in self.globs)


# The Erase selectors a view can allow (names of EraseSelector kinds).
ERASE_SELECTORS = ("ids", "key", "source_turn", "category", "all_of_subject")


@dataclass(frozen=True)
class View:
    """What one agent may read, write and erase, and which Memory fields it receives.

    An agent without a stored view may do nothing (deny by default). Reading is decided on
    (category, key) alone, before anything is looked up, so the answer never depends on what
    exists.
    """

    agent: str
    read_rules: tuple[ViewRule, ...]
    write_rules: tuple[ViewRule, ...]
    may_erase: bool
    visible_fields: frozenset[str]
    description: str = ""
    version: int = 0
    erase_selectors: frozenset[str] = frozenset()  # empty: every selector (when may_erase)
    # The most trusted source kind the agent may assert in what it writes.
    max_source_kind: SourceKind = SourceKind.INPUT

    @property
    def has_globs(self) -> bool:
        """Whether some rule has a glob other than ``*`` alone: deciding on a key may then cost
        up to ~10 µs per glob (``Glob``), and a view may hold 2,048 of them."""
        return any(p != "*" and "*" in p for rule in (*self.read_rules, *self.write_rules) for p in rule.key_patterns)

    @classmethod
    def full(cls, agent: str, description: str = "full access") -> View:
        """Every category and key, every field, every erase selector."""
        every = tuple(ViewRule(c) for c in Category)
        return cls(agent, every, every, True, MEMORY_FIELDS, description, max_source_kind=SourceKind.SYNC)

    def may_write(self, category: Category, key: str) -> bool:
        return any(rule.allows(category, key) for rule in self.write_rules)

    def may_read(self, category: Category, key: str) -> bool:
        """Whether a memory of ``category`` with ``key`` ('' for episodic ones) is readable."""
        return any(rule.allows(category, key) for rule in self.read_rules)

    def may_assert(self, kind: SourceKind) -> bool:
        return kind.rank <= self.max_source_kind.rank

    def may_read_category(self, category: Category) -> bool:
        return any(rule.category is category for rule in self.read_rules)

    def may_read_key(self, key: str, categories: tuple[Category, ...] = ()) -> bool:
        """Whether some read rule (of one of ``categories``, if given) allows ``key``.

        Episodic categories have no keys, so their rules never allow a named key.
        """
        return any(rule.allows(rule.category, key) for rule in self.read_rules
                   if (not categories or rule.category in categories) and not (key and rule.category.episodic))

    def reads_everything(self) -> bool:
        """Every category with every key: what erasing a whole subject needs."""
        return all(any(r.category is c and "*" in r.key_patterns for r in self.read_rules) for c in Category)

    def may_erase_with(self, selector: str) -> bool:
        return self.may_erase and (not self.erase_selectors or selector in self.erase_selectors)

    def definition(self) -> dict[str, object]:
        """The view as plain data, in a canonical order (agent and version aside): what is
        stored, compared for changes and shown as a diff."""
        def rules(items: tuple[ViewRule, ...]) -> list[dict[str, object]]:
            merged: dict[Category, set[str]] = {}
            for rule in items:
                merged.setdefault(rule.category, set()).update(rule.key_patterns)
            return [{"category": c.value, "key_patterns": sorted(["*"] if "*" in p else p)}
                    for c, p in sorted(merged.items(), key=lambda item: list(Category).index(item[0]))]

        return {
            "description": self.description,
            "read_rules": rules(self.read_rules),
            "write_rules": rules(self.write_rules),
            "may_erase": self.may_erase,
            "erase_selectors": [s for s in ERASE_SELECTORS if s in self.erase_selectors] if self.may_erase else [],
            "visible_fields": sorted(self.visible_fields),
            "max_source_kind": self.max_source_kind.value,
        }

    @classmethod
    def from_definition(cls, agent: str, definition: Mapping[str, Any], version: int = 0) -> View:
        """The view a stored definition (``definition()``'s JSON) describes."""
        def rules(items: Iterable[Mapping[str, Any]]) -> tuple[ViewRule, ...]:
            return tuple(ViewRule(Category(r["category"]), tuple(r["key_patterns"])) for r in items)

        return cls(
            agent=agent,
            read_rules=rules(definition.get("read_rules", [])),
            write_rules=rules(definition.get("write_rules", [])),
            may_erase=bool(definition.get("may_erase", False)),
            visible_fields=frozenset(definition.get("visible_fields", [])),
            description=str(definition.get("description", "")),
            version=version,
            erase_selectors=frozenset(definition.get("erase_selectors", [])),
            # Views stored before the field existed assert what a plain write asserts.
            max_source_kind=SourceKind(str(definition.get("max_source_kind", SourceKind.INPUT.value))),
        )


@dataclass(frozen=True)
class ViewChange:
    """The stored view after a put, whether the put changed anything, and what it replaced."""

    view: View
    changed: bool
    before: View | None
