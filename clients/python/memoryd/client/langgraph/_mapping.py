"""How a LangGraph item is written as a memoryd memory and read back — pure functions, no I/O.

    namespace ("users", "u-42", "prefs") + key "theme"
        memory key   lg/users.u-42.prefs/theme          (one memory per namespace and key)
        tags         langgraph, lg:users, lg:users.u-42, lg:users.u-42.prefs   (one per prefix)
        text         what the index fields of the value say (what Recall searches)
        data         {"langgraph": {"namespace": [...], "key": ..., "value": "<the value as JSON>"}}

The value travels as JSON text inside ``data`` so that ``get`` returns exactly the dict that was
put: a protobuf ``Struct`` holds every number as a double (``1`` would come back ``1.0``) and
limits nesting. The key keeps the namespace readable so that an operator's view can grant a
namespace with a key pattern (``lg/users.*``); characters a memoryd key may not hold are escaped
as ``:`` and two hex digits per UTF-8 byte, and a key that would pass 128 bytes is replaced by a
hash (``lg/:h…``), which such a pattern does not match (a view grants less, never more).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from google.protobuf import struct_pb2
from langgraph.store.base import Item, MatchCondition, get_text_at_path, tokenize_path

__all__ = [
    "MARKER_TAG", "MAX_DEPTH", "MAX_KEY_BYTES", "MAX_TEXT_BYTES", "memory_key", "prefix_tag", "namespace_tags",
    "value_text", "item_data", "stored_item", "matches_filter", "namespace_matches", "EPOCH",
]

MARKER_TAG = "langgraph"
MAX_KEY_BYTES = 128  # MemoryDraft.key
MAX_TAG_BYTES = 64  # MemoryDraft.tags[*]
MAX_DEPTH = 31  # MemoryDraft.tags holds 32: the marker and one per prefix
MAX_TEXT_BYTES = 8 * 1024  # the server's default text limit; the exact value is in data anyway
EPOCH = datetime.fromtimestamp(0, UTC)

_LABEL_SAFE = re.compile(r"[A-Za-z0-9_-]")
_KEY_SAFE = re.compile(r"[A-Za-z0-9._/-]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # what memoryd refuses in a tag


def _escape(text: str, safe: re.Pattern[str]) -> str:
    return "".join(c if safe.fullmatch(c) else "".join(f":{b:02x}" for b in c.encode()) for c in text)


def memory_key(namespace: Sequence[str], key: str) -> str:
    """The memoryd key of an item: ``lg/`` + the labels joined by ``.`` + ``/`` + the key, escaped.

    Labels never hold ``.`` (LangGraph refuses it) and ``/`` is escaped in them, so the first
    ``/`` after ``lg/`` ends the namespace, and ``:`` is escaped everywhere: the encoding is
    one-to-one. Too long for memoryd, it is a hash of both instead (still one-to-one in practice).
    """
    readable = "lg/" + ".".join(_escape(label, _LABEL_SAFE) for label in namespace) + "/" + _escape(key, _KEY_SAFE)
    if len(readable) <= MAX_KEY_BYTES:
        return readable
    digest = hashlib.sha256(json.dumps([list(namespace), key]).encode()).hexdigest()
    return "lg/:h" + digest[:48]  # ":h" is no escape (not two hex digits): never a readable key


def prefix_tag(prefix: Sequence[str]) -> str:
    """The tag every item under ``prefix`` carries (``()`` → the marker every item carries)."""
    if not prefix:
        return MARKER_TAG
    joined = ".".join(prefix)
    tag = "lg:" + joined
    if len(tag.encode()) <= MAX_TAG_BYTES and not _CONTROL.search(tag):
        return tag
    return "lg#" + hashlib.sha256(joined.encode()).hexdigest()[:40]


def namespace_tags(namespace: Sequence[str]) -> list[str]:
    """The marker and one tag per prefix of ``namespace``: a search of any prefix is a tag filter."""
    if len(namespace) > MAX_DEPTH:
        raise ValueError(f"memoryd stores namespaces up to {MAX_DEPTH} labels deep (one tag per prefix), "
                         f"got {len(namespace)}")
    return [prefix_tag(namespace[:depth]) for depth in range(len(namespace) + 1)]


def value_text(key: str, value: Mapping[str, Any], fields: Sequence[str] | None) -> str:
    """The memory's text: what ``fields`` (LangGraph's index paths, ``["$"]`` = the whole value as
    JSON) pick from the value, one per line; ``None`` (``index=False``) or nothing picked → the key,
    since memoryd needs a text. Cut to the server's default text limit (the value itself is whole
    in ``data``)."""
    pieces: list[str] = []
    for path in fields or ():
        pieces.extend(get_text_at_path(value, path if path == "$" else tokenize_path(path)))
    text = "\n".join(p for p in pieces if p.strip()) or key
    return text.encode()[:MAX_TEXT_BYTES].decode(errors="ignore")


def item_data(namespace: Sequence[str], key: str, value: Mapping[str, Any], ttl: float | None) -> struct_pb2.Struct:
    """The memory's ``data``: where the item is and its value as JSON text (exact round trip)."""
    try:
        encoded = json.dumps(dict(value), ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise TypeError(f"MemorydStore stores JSON values: {error}") from None
    entry: dict[str, Any] = {"namespace": list(namespace), "key": key, "value": encoded}
    if ttl is not None:
        entry["ttl_minutes"] = ttl
    data = struct_pb2.Struct()
    data.update({"langgraph": entry})
    return data


def stored_item(memory: Any) -> Item | None:
    """The item a memory holds, or None for a memory the store did not write, whose ``data`` the
    caller's view hides, or whose TTL has run out."""
    if not memory.HasField("data") or "langgraph" not in memory.data.fields:
        return None
    # Recall serves nothing past valid_until, but MemoryView lists a lapsed validity (it dates a
    # value): an item whose TTL ran out is gone for every read of the store, at this clock.
    if memory.HasField("valid_until") and memory.valid_until.ToDatetime(UTC) <= datetime.now(UTC):
        return None
    entry = memory.data.fields["langgraph"].struct_value.fields
    try:
        namespace = tuple(v.string_value for v in entry["namespace"].list_value.values)
        value = json.loads(entry["value"].string_value)
        key = entry["key"].string_value
    except (KeyError, ValueError):
        return None
    if not isinstance(value, dict):
        return None
    created = memory.created_at.ToDatetime(UTC) if memory.HasField("created_at") else EPOCH
    updated = memory.updated_at.ToDatetime(UTC) if memory.HasField("updated_at") else created
    return Item(value=value, key=key, namespace=namespace, created_at=created, updated_at=updated)


def namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """LangGraph's prefix/suffix match, ``*`` matching any one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    labels = namespace[:len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path):]
    return all(p == "*" or p == label for p, label in zip(path, labels))


_ORDERED = {"$gt": lambda a, b: a > b, "$gte": lambda a, b: a >= b, "$lt": lambda a, b: a < b,
            "$lte": lambda a, b: a <= b}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if operator in _ORDERED:
        # Numbers compare as numbers, strings as strings; anything else (a missing field, a
        # number against a string) does not match, where InMemoryStore raises TypeError.
        a, b = _number(value), _number(operand)
        if a is not None and b is not None:
            return bool(_ORDERED[operator](a, b))
        if isinstance(value, str) and isinstance(operand, str):
            return bool(_ORDERED[operator](value, operand))
        return False
    raise ValueError(f"unsupported filter operator {operator!r} (MemorydStore knows $eq, $ne, $gt, $gte, $lt, $lte)")


def _compare(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(value, op, operand) for op, operand in wanted.items())
        return isinstance(value, dict) and all(_compare(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (isinstance(value, list | tuple) and len(value) == len(wanted)
                and all(_compare(v, w) for v, w in zip(value, wanted)))
    return bool(value == wanted)


def matches_filter(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether an item's value passes a ``search`` filter, as InMemoryStore reads one: each field
    equal (nested dicts field by field, lists element by element) or passing its operators."""
    return all(_compare(value.get(field), wanted) for field, wanted in (filter or {}).items())
