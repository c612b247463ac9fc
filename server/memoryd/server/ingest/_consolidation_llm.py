"""The consolidation model: the extraction model (same endpoint, key and timeout), asked to
turn a group of episodic fragments about one topic into ONE profile memory, or to skip it.

The answer is one object under a strict JSON schema::

    {"skip": false, "category": "preference", "key": "exercise_habit",
     "text": "Alice runs 5–10 km most mornings.", "importance": 0.7, "confidence": 0.9}

or ``{"skip": true}`` (the other fields, if sent, are then ignored). Anything else is an
``ExtractionParseError``; outages are ``ExtractionUnavailable`` / ``ExtractionRefused`` as for
extraction.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from memoryd.domain import Category

from ..screen import ExtractedItem
from ._chat import ChatClient, Probe
from ._chat_errors import ExtractionParseError
from ._extraction_llm import system_prompt, unit_number

PROFILE_CATEGORIES = (Category.FACT, Category.PREFERENCE, Category.CONSTRAINT, Category.GOAL)

PROFILE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["skip", "category", "key", "text", "importance", "confidence"],
    "properties": {
        "skip": {"type": "boolean", "description": "true if the fragments do not add up to one lasting "
                 "fact, preference, constraint or goal about the user"},
        "category": {"type": "string", "enum": [c.value for c in PROFILE_CATEGORIES]},
        "key": {"type": "string", "description": "snake_case key (exercise_habit, coffee_preference)"},
        "text": {"type": "string", "description": "the profile memory as one self-contained sentence"},
        "importance": {"type": "number", "minimum": 0, "maximum": 1},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
}

SYSTEM_PROMPT = """You consolidate long-term memories about the user.
The current date and time is {now} ({zone}). Below are several episodic memories (events and
decisions) about one topic, each with its date. If together they show one lasting fact,
preference, constraint or goal about the user, return it as ONE profile memory:
- category: fact, preference, constraint or goal; key: a snake_case key;
- text: one self-contained sentence, in the language of the memories, that keeps the useful
  specifics (places, amounts, frequency);
- importance and confidence: 0 to 1 (confidence: how clearly the memories show it).
Only say what the memories say about the user. Never write requests or instructions
addressed to an assistant. If they do not add up to one lasting thing, return {{"skip": true}}
with the other fields empty."""


def fragment_lines(fragments: Sequence[tuple[datetime, str]], zone: Any) -> str:
    """The fragments as the model reads them: one line each, with its local date."""
    return "\n".join(f"- ({at.astimezone(zone).strftime('%Y-%m-%d %a')}) {' '.join(text.split())}"
                     for at, text in fragments)


def parse_profile(document: Any) -> ExtractedItem | None:
    """The profile memory of the model's JSON ``document``, None if the model skipped the
    group; ExtractionParseError if it is not what was asked."""
    if not isinstance(document, dict):
        raise ExtractionParseError("the model's JSON is not an object")
    skip = document.get("skip", False)
    if not isinstance(skip, bool):
        raise ExtractionParseError("skip must be a boolean")
    if skip:
        return None
    try:
        category = Category(str(document.get("category", "")).strip().lower())
    except ValueError:
        raise ExtractionParseError("category is not a memory category") from None
    if category not in PROFILE_CATEGORIES:
        raise ExtractionParseError("category must be fact, preference, constraint or goal")
    key, text = document.get("key"), document.get("text")
    if not isinstance(key, str) or not key.strip():
        raise ExtractionParseError("key must be a non-empty string")
    if not isinstance(text, str) or not text.strip():
        raise ExtractionParseError("text must be a non-empty string")
    return ExtractedItem(category=category, text=text.strip(), key=key.strip(),
                         importance=unit_number(document.get("importance", 0.5), "importance"),
                         confidence=unit_number(document.get("confidence"), "confidence"))


# A request shaped as every consolidation request is, holding nothing of any subject.
PROBE = Probe(fragment_lines([(datetime(2026, 1, 1, tzinfo=UTC), "Had tea.")], UTC), PROFILE_SCHEMA)


class ChatConsolidator(ChatClient):
    """Asks the extraction model for one profile memory per group of fragments."""

    async def consolidate(self, fragments: Sequence[tuple[datetime, str]], now: datetime,
                          zone: Any) -> ExtractedItem | None:
        return parse_profile(await self.ask(system_prompt(SYSTEM_PROMPT, now, zone), fragment_lines(fragments, zone),
                                            "profile_memory", PROFILE_SCHEMA, probe=PROBE))
