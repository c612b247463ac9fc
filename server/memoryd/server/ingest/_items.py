"""What the extraction worker does to one item or job, pure: a model's key and tags in the forms
memoryd stores, the view's rules narrowed to a category, the subject's time zone chosen by what
the view shows, and the PII screen of a job's turns.
"""

from __future__ import annotations

import math
import re
import unicodedata
from datetime import UTC, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memoryd.domain import (
    CONTRACT,
    CONTROL_CHARACTERS,
    Category,
    Turn,
    View,
)

from ._extraction_llm import as_read
from ..screen import PiiScreen


_KEY_CHARS = re.compile(r"[^a-z0-9._:/-]+")


# Where a subject's own time zone is kept: a `timezone` memory of one of these categories.
TIMEZONE_CATEGORIES = (Category.PREFERENCE, Category.FACT)


def clean_key(key: str, category: Category, max_bytes: int = 128) -> str:
    """The model's key in the form keys take (snake_case: "Home City" is ``home_city``); ''
    for episodic categories, and for a key that would lose letters or digits on the way ("家乡",
    "家乡_city"): what is left of it could name another memory, which the item would replace."""
    if category.episodic:
        return ""
    folded = "".join(c for c in unicodedata.normalize("NFKD", key) if not unicodedata.combining(c))
    if any(c.isalnum() and not c.isascii() for c in folded):
        return ""
    slug = _KEY_CHARS.sub("_", folded.strip().lower().replace(" ", "_")).strip("_.:/-")
    return slug if slug and len(slug.encode()) <= max_bytes else ""


def clean_tags(*groups: tuple[str, ...], limit: int = CONTRACT.tags,
               max_bytes: int = CONTRACT.tag_bytes) -> tuple[str, ...]:
    tags: list[str] = []
    for group in groups:
        for tag in group:
            tag = " ".join(CONTROL_CHARACTERS.sub(" ", tag).split())
            if tag and len(tag.encode()) <= max_bytes and tag not in tags:
                tags.append(tag)
    return tuple(tags[:limit])


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def read_rules_of(view: View | None, category: Category) -> tuple[tuple[Category, tuple[str, ...]], ...]:
    """The view's read rules narrowed to ``category``, as a ReadFilter takes them (none: the
    view may not read the category, and a filter with no rules matches nothing)."""
    if view is None:
        return ()
    return tuple((r.category, r.key_patterns) for r in view.read_rules if r.category is category)


def timezone_categories(view: View | None) -> tuple[Category, ...]:
    """The categories whose ``timezone`` memory the view may read, key and text included (a
    look-up by key needs the key visible, as a Recall by key does)."""
    if view is None or not {"key", "text"} <= view.visible_fields:
        return ()
    return tuple(c for c in TIMEZONE_CATEGORIES if view.may_read_key("timezone", (c,)))


def zone_name(found: list[tuple[Category, str, datetime]], visible: frozenset[str]) -> str:
    """The subject's time zone among its ``timezone`` memories (category, text, update time),
    chosen only by what ``visible`` shows: the latest update if update times are shown, then
    the first of TIMEZONE_CATEGORIES if categories are, then the text itself. '' for none."""
    def rank(entry: tuple[Category, str, datetime]) -> tuple[Any, ...]:
        category, text, updated_at = entry
        return (-updated_at.timestamp() if "updated_at" in visible else 0,
                TIMEZONE_CATEGORIES.index(category) if "category" in visible else 0, text)

    return min(found, key=rank)[1] if found else ""


def said_screen(turns: tuple[Turn, ...], zone: tzinfo = UTC) -> PiiScreen:
    """The job's PII screen: it knows the numbers its turns held, as written and as the model
    read them (``as_read``), to find them again in whatever the job keeps or logs."""
    return PiiScreen([*(t.text for t in turns), *(as_read(t, zone) for t in turns)])


def zone_of(name: str) -> tzinfo | None:
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None
