"""Views: what one agent may read, write and erase, and which fields it receives."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._model import Category

# The Memory fields a view can make visible (names of memoryd.v1.Memory fields).
MEMORY_FIELDS = frozenset({
    "id", "subject", "scope", "session_id", "category", "key", "text", "data", "importance",
    "confidence", "stability", "pinned", "tags", "valid_from", "valid_until", "provenance",
    "version", "status", "created_at", "updated_at", "access_count", "last_access_at",
})


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """``*`` matches any run of characters; every other character matches only itself."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


def glob_to_like(pattern: str) -> str:
    """The same glob as a SQL LIKE pattern (escape character ``\\``)."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%")


@dataclass(frozen=True)
class ViewRule:
    """Allows one category, for keys matching any of the patterns."""

    category: Category
    key_patterns: tuple[str, ...] = ("*",)

    def allows(self, category: Category, key: str) -> bool:
        return category is self.category and any(glob_to_regex(p).fullmatch(key) for p in self.key_patterns)


@dataclass(frozen=True)
class View:
    agent: str
    read_rules: tuple[ViewRule, ...]
    write_rules: tuple[ViewRule, ...]
    may_erase: bool
    visible_fields: frozenset[str]
    description: str = ""
    version: int = 0

    @classmethod
    def allow_all(cls, agent: str) -> View:
        """Everything: the effective view of every agent until per-agent views are stored."""
        every = tuple(ViewRule(c) for c in Category)
        return cls(agent, every, every, True, MEMORY_FIELDS, "full access (no per-agent view stored)")

    def may_write(self, category: Category, key: str) -> bool:
        return any(rule.allows(category, key) for rule in self.write_rules)
