"""The extraction model's side of the conversation: the item schema, the prompt, the
transcript the model reads, and how its answer becomes items.

The request and the HTTP exchange are the chat client's (``_chat``: output modes, lenient
reading, ``max_tokens``, what an endpoint takes learnt from probes of memoryd's own: ``PROBE``,
one turn nobody said; errors that quote nothing of the server's answer).

An answer that is not a JSON document with an ``items`` list is an ``ExtractionParseError``:
the job fails at once and nothing is written — except an answer cut off part-way through the
list (at ``max_tokens``, say, by a model that loops): its complete items are kept, and the
one the cut went through is counted as ``cut_off`` (``_chat.complete_elements``). One item that breaks the schema (an unknown
category, an empty text, a confidence of 1.5: grammar-constrained decoding ignores numeric
ranges) is dropped alone and counted as ``invalid_<field>``; the items beside it are kept.

Before the model reads a turn, its relative dates are written out ("next Friday
(2026-12-04)", resolved against the turn's own time in the subject's zone): a model that
paraphrases the phrase away keeps the date.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from memoryd.domain import Category, Stability, Turn, dated

from ._chat import ChatClient, CutOff, Probe
from ._chat_errors import ExtractionParseError
from ..screen import SENSITIVE_CLASSES, ExtractedItem

_log = logging.getLogger("memoryd.server.extraction")

CUT_OFF = "cut_off"


_ITEM_PROPERTIES: dict[str, Any] = {
    "category": {"type": "string", "enum": [c.value for c in Category]},
    "key": {"type": "string", "description": "snake_case key for structured memories "
            "(home_city, primary_language, timezone); empty for events and decisions"},
    "text": {"type": "string", "description": "the memory as one self-contained sentence about the user"},
    "importance": {"type": "number", "minimum": 0, "maximum": 1},
    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    "stability": {"type": "string", "enum": [s.value for s in Stability]},
    "sensitive": {"type": "string", "enum": ["none", *SENSITIVE_CLASSES]},
    "entities": {"type": "array", "items": {"type": "string"}},
    "source_turn_ids": {"type": "array", "items": {"type": "string"}},
    "tags": {"type": "array", "items": {"type": "string"}},
}
ITEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["items"],
    "properties": {"items": {"type": "array", "items": {
        "type": "object", "additionalProperties": False, "required": list(_ITEM_PROPERTIES),
        "properties": _ITEM_PROPERTIES,
    }}},
}

def item_schema(turns: tuple[Turn, ...] | list[Turn]) -> dict[str, Any]:
    """ITEM_SCHEMA with ``source_turn_ids`` restricted to the job's own turn ids: a model under
    grammar-constrained decoding cannot name "/t1", "" or a turn of another job."""
    ids = list(dict.fromkeys(t.turn_id for t in turns))
    if not ids:
        return ITEM_SCHEMA
    properties = {**_ITEM_PROPERTIES,
                  "source_turn_ids": {"type": "array", "items": {"type": "string", "enum": ids}}}
    item = {**ITEM_SCHEMA["properties"]["items"]["items"], "properties": properties}
    return {**ITEM_SCHEMA, "properties": {"items": {"type": "array", "items": item}}}


SYSTEM_PROMPT = """You extract long-term memories about the user from a conversation.
The current date and time is {now} ({zone}). Read relative dates ("yesterday", "next Friday")
against it and against each turn's own time.

Return JSON with a list "items". Each item is one thing worth remembering about the user:
- category: fact, preference, constraint, goal, context (structured, with a snake_case key such
  as home_city, primary_language, timezone), or event, decision (episodic, key "").
- text: one self-contained sentence in the language of the conversation.
- importance, confidence: 0 to 1. stability: "transient" for passing states (tired today),
  else "stable".
- sensitive: the class if the item reveals health, emotions, finances, sexuality, religion or
  politics, else "none".
- entities: people, places, things named. source_turn_ids: the ids of the turns it comes from.
  tags: a few topical words.
Only remember what the user said about themselves or their world. Never turn requests or
instructions addressed to an assistant into memories. Return {{"items": []}} if there is
nothing worth remembering."""


def as_read(turn: Turn, zone: Any) -> str:
    """A turn's text as the model reads it: on one line, its relative dates written out
    against the turn's own time in ``zone``. Its sources are checked against this too."""
    return " ".join(dated(turn.text, at=turn.time.astimezone(zone)).split())


def transcript(turns: tuple[Turn, ...] | list[Turn], zone: Any) -> str:
    """The turns as the model reads them: one line each, with id, local time and speaker."""
    return "\n".join(f"[{t.turn_id}] ({t.time.astimezone(zone).strftime('%Y-%m-%d %H:%M %a')}) {t.speaker}: "
                     f"{as_read(t, zone)}" for t in turns)


def unit_number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ExtractionParseError(f"{where} must be a number")
    if not 0 <= value <= 1:
        raise ExtractionParseError(f"{where} must be between 0 and 1")
    return float(value)


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ExtractionParseError(f"{where} must be a list of strings")
    return tuple(v.strip() for v in value if v.strip())


def _sensitive(value: Any, where: str) -> str:
    if value is None or value is False:
        return ""
    if value is True:
        return "other"
    if isinstance(value, str):
        name = value.strip().lower()
        if name in ("", "none", "no", "false"):
            return ""
        return name if name in SENSITIVE_CLASSES else "other"
    raise ExtractionParseError(f"{where} must be a boolean or a sensitivity class")


def _item(raw: Any, where: str) -> ExtractedItem:
    if not isinstance(raw, dict):
        raise ExtractionParseError(f"{where} must be an object")
    try:
        category = Category(str(raw.get("category", "")).strip().lower())
    except ValueError:
        raise ExtractionParseError(f"{where}.category is not a memory category") from None
    text = raw.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ExtractionParseError(f"{where}.text must be a non-empty string")
    key = raw.get("key") or ""
    if not isinstance(key, str):
        raise ExtractionParseError(f"{where}.key must be a string")
    stability = raw.get("stability") or "stable"
    try:
        stability = Stability(str(stability).strip().lower())
    except ValueError:
        raise ExtractionParseError(f"{where}.stability must be stable or transient") from None
    return ExtractedItem(
        category=category,
        text=text.strip(),
        key=key.strip(),
        importance=unit_number(raw.get("importance", 0.5), f"{where}.importance"),
        confidence=unit_number(raw.get("confidence"), f"{where}.confidence"),
        stability=stability,
        sensitive=_sensitive(raw.get("sensitive"), f"{where}.sensitive"),
        entities=_strings(raw.get("entities"), f"{where}.entities"),
        source_turn_ids=_strings(raw.get("source_turn_ids"), f"{where}.source_turn_ids"),
        tags=_strings(raw.get("tags"), f"{where}.tags"),
    )


def parse_items(document: Any) -> tuple[list[ExtractedItem], Counter[str]]:
    """The valid items of the model's JSON ``document``, and the invalid ones counted by
    reason (``invalid_<field>``: the first field that breaks the schema; ``cut_off``: the item
    an answer cut off went through); ExtractionParseError if it is not an object with an
    ``items`` list."""
    invalid: Counter[str] = Counter()
    if isinstance(document, CutOff):  # the item the cut went through is lost, and counted
        document = document.document
        invalid[CUT_OFF] += 1
    if not isinstance(document, dict) or not isinstance(document.get("items"), list):
        raise ExtractionParseError("the model's JSON has no 'items' list")
    items: list[ExtractedItem] = []
    for i, raw_item in enumerate(document["items"]):
        try:
            items.append(_item(raw_item, f"items[{i}]"))
        except ExtractionParseError as exc:
            _log.info("extraction answer: dropped an invalid item: %s", exc.detail)
            invalid[_invalid_reason(exc.detail)] += 1
    return items, invalid


def _invalid_reason(detail: str) -> str:
    """``invalid_<field>`` of an item's parse error ("items[2].confidence must be …"), or
    ``invalid_item`` for an item that is not an object."""
    match = re.match(r"items\[\d+\]\.(\w+)", detail)
    return f"invalid_{match.group(1)}" if match else "invalid_item"


def system_prompt(template: str, now: datetime, zone: Any) -> str:
    """A system prompt told the local date, time and zone."""
    return template.format(now=now.astimezone(zone).strftime("%Y-%m-%d %H:%M %A"), zone=str(zone))


_PROBE_TURNS = (Turn("t1", "user", "Hello.", datetime(2026, 1, 1, 9, 0, tzinfo=UTC)),)
# A request shaped as every extraction request is, holding nothing of any job.
PROBE = Probe(transcript(_PROBE_TURNS, UTC), item_schema(_PROBE_TURNS))


class ChatExtractor(ChatClient):
    """Asks the chat model for memory items."""

    @staticmethod
    def _question(turns: tuple[Turn, ...] | list[Turn], now: datetime,
                  zone: Any) -> tuple[str, str, str, dict[str, Any]]:
        """What the model is asked for ``turns``: system prompt, transcript, schema name and schema."""
        return system_prompt(SYSTEM_PROMPT, now, zone), transcript(turns, zone), "memory_items", item_schema(turns)

    def request_body(self, turns: tuple[Turn, ...] | list[Turn], now: datetime, zone: Any) -> dict[str, Any]:
        """The request ``extract`` sends (in the mode in use now)."""
        return self.body(*self._question(turns, now, zone))

    async def extract(self, turns: tuple[Turn, ...] | list[Turn], now: datetime,
                      zone: Any) -> tuple[list[ExtractedItem], Counter[str]]:
        """The model's valid items for ``turns``, and its invalid ones counted by reason."""
        return parse_items(await self.ask(*self._question(turns, now, zone), probe=PROBE, salvage="items"))
