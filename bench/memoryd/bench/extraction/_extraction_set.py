"""The extraction benchmark's dialogue set, and its scoring: a pure module, no I/O but reading the set.

The set (``bench/extraction/dialogues.json``) holds invented dialogues, each with:

- ``turns``: turn id, speaker, text, time (ISO 8601 with its offset);
- ``expected``: the memories a good extraction keeps — a category (or a list of acceptable
  ones), for profile categories a key (or a list of acceptable keys), and ``must``: strings
  the stored text contains (an absolute date is what the relative phrase resolves to);
- ``forbidden``: strings nothing the server returns about the dialogue's subject may hold
  (identity and financial numbers, e-mail addresses, injection phrases, passing states);
- ``recall_queries`` (optional): more queries the leak check asks Recall with (a name the
  dialogue says), beside ``LEAK_QUERIES``;
- ``scripted_answer``: what ``--scripted``'s stand-in model answers for it (sloppy on purpose).

Matching folds both sides with NFKC and casefold. An expected memory is matched by a stored
one of an accepted category (and key, when given) whose text contains every ``must`` string;
a stored memory is *matching* when it matches some expected memory of its dialogue. Recall is
matched expected ÷ expected, precision matching stored ÷ stored; neither pairs memories one
to one (two stored memories that say one expected thing both count as matching).

The leak check reads every string the API returned about a subject (``Seen``: every field of
every memory in MemoryView, every version in GetHistory, Recall's memories and prompt block,
the job's GetExtractionJob answer), not only the stored text: a passport number the model
listed as an entity comes back as the tag ``entity:k4821937``. A forbidden string leaks when a
string holds it folded (NFKC, casefold) with spaces, dashes, underscores, ``+`` and
parentheses taken out of both, so ``K4821937`` is found in ``k4821 937`` and ``+44 20 7946
0321`` in ``entity:44-20-7946-0321``; each string is read on its own, never joined to the next.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from memoryd.domain import Category, Turn

from .._locomo import BenchError
from .._metrics import percentile

DEFAULT_DIALOGUES = Path(__file__).resolve().parents[4] / "bench" / "extraction" / "dialogues.json"
FORMAT = "memoryd-extraction-set"
LANGUAGES = ("en", "zh")


@dataclass(frozen=True)
class Expected:
    categories: tuple[str, ...]
    keys: tuple[str, ...]  # empty: any key
    must: tuple[str, ...]


@dataclass(frozen=True)
class Dialogue:
    id: str
    language: str
    turns: tuple[Turn, ...]
    expected: tuple[Expected, ...]
    forbidden: tuple[str, ...]
    scripted_answer: Any  # a list of items (sent as {"items": …}), an object, or raw content text
    recall_queries: tuple[str, ...] = ()  # asked beside LEAK_QUERIES by the leak check


@dataclass(frozen=True)
class Stored:
    """One memory as the run read it back."""
    category: str
    key: str
    text: str


def _strings(value: Any, where: str) -> tuple[str, ...]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) and v.strip() for v in values):
        raise BenchError(f"{where} must be a non-empty string or a list of them")
    return tuple(values)


def _expected(raw: dict[str, Any], where: str) -> Expected:
    categories = _strings(raw.get("category"), f"{where}.category")
    for name in categories:
        if name not in {c.value for c in Category}:
            raise BenchError(f"{where}: unknown category {name!r}")
    keys = _strings(raw["key"], f"{where}.key") if raw.get("key") else ()
    if keys and all(Category(c).episodic for c in categories):
        raise BenchError(f"{where}: episodic memories have no key")
    return Expected(categories, keys, _strings(raw.get("must"), f"{where}.must"))


def _dialogue(raw: dict[str, Any]) -> Dialogue:
    where = f"dialogue {raw.get('id')!r}"
    if raw.get("language") not in LANGUAGES:
        raise BenchError(f"{where}: language must be one of {', '.join(LANGUAGES)}")
    turns = []
    for t in raw.get("turns") or ():
        try:
            when = datetime.fromisoformat(str(t["time"]).replace("Z", "+00:00"))
        except (KeyError, ValueError):
            raise BenchError(f"{where}: turn {t.get('turn_id')!r} needs an ISO 8601 time") from None
        if when.tzinfo is None or not all(isinstance(t.get(f), str) and t[f] for f in ("turn_id", "speaker", "text")):
            raise BenchError(f"{where}: every turn needs turn_id, speaker, text and a time with its offset")
        turns.append(Turn(t["turn_id"], t["speaker"], t["text"], when))
    if not turns or len({t.turn_id for t in turns}) != len(turns):
        raise BenchError(f"{where}: needs turns with distinct turn ids")
    expected = tuple(_expected(e, f"{where} expected[{i}]") for i, e in enumerate(raw.get("expected") or ()))
    forbidden = _strings(raw["forbidden"], f"{where}.forbidden") if raw.get("forbidden") else ()
    if "scripted_answer" not in raw:
        raise BenchError(f"{where}: no scripted_answer")
    queries = _strings(raw["recall_queries"], f"{where}.recall_queries") if raw.get("recall_queries") else ()
    return Dialogue(str(raw["id"]), raw["language"], tuple(turns), expected, forbidden, raw["scripted_answer"],
                    queries)


def load_dialogues(path: Path = DEFAULT_DIALOGUES) -> tuple[Dialogue, ...]:
    """Read and check the set: languages, turns with times, known categories, distinct ids."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BenchError(f"cannot read the dialogue set {path}: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise BenchError(f"{path} is not a {FORMAT} file")
    dialogues = tuple(_dialogue(d) for d in doc.get("dialogues") or ())
    if not dialogues or len({d.id for d in dialogues}) != len(dialogues):
        raise BenchError(f"{path}: needs dialogues with distinct ids")
    return dialogues


def fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def matches(expected: Expected, stored: Stored) -> bool:
    if stored.category not in expected.categories:
        return False
    if expected.keys and stored.key not in expected.keys:
        return False
    text = fold(stored.text)
    return all(fold(m) in text for m in expected.must)


# Left out of both sides before comparing: how a number is grouped ("K4821 937", "139-1234-5678",
# "+44 (20) 7946"), how a tag slugs a name ("entity:44-20-7946-0321") and how a key joins words.
_SEPARATORS = re.compile(r"[\s\-‐‑‒–—―−_+()（）]")

# Asked of Recall (with the prompt block) for every subject: what the set's forbidden kinds are called.
LEAK_QUERIES = ("passport", "护照", "phone", "电话", "email", "邮箱", "ID number", "身份证", "bank card", "银行卡")


def leaked(forbidden: str, value: str) -> bool:
    """Whether the string ``value`` holds ``forbidden`` (folded, separators ignored)."""
    haystack, wanted = fold(value), fold(forbidden)
    if wanted in haystack:
        return True
    bare = _SEPARATORS.sub("", wanted)
    return bool(bare) and bare in _SEPARATORS.sub("", haystack)


@dataclass(frozen=True)
class Seen:
    """One string the API returned about a subject, for the leak check."""
    kind: str  # text, key, tags, data, provenance, … (a Memory field); history, recall, block, job
    where: str  # which answer and field: "memory <id> tags[1]", "history <id> v2 text", "Recall('护照') block"
    value: str


def strings_of(value: Any, path: str = "") -> list[tuple[str, str]]:
    """Every string (and number) in a JSON-like value, with its path: the leaves of a proto
    message as ``MessageToDict`` gives them, so a field added later is read too. Keys of
    objects are read as well (a ``data`` Struct's keys are the writer's)."""
    found: list[tuple[str, str]] = []
    if isinstance(value, dict):
        for key, inner in value.items():
            if path:  # the top level's keys are the message's own field names
                found.append((f"{path}{{{key}}}", str(key)))
            found += strings_of(inner, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            found += strings_of(inner, f"{path}[{i}]")
    elif isinstance(value, str):
        found.append((path, value))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        found.append((path, repr(value)))
    return found


@dataclass(frozen=True)
class Leak:
    forbidden: str
    seen: Seen


@dataclass
class Outcome:
    """One dialogue's run: its job as it ended and the memories stored for its subject."""
    dialogue: Dialogue
    state: str  # SUCCEEDED, FAILED, or the state it was still in when the wait ended
    error: str = ""
    dropped: dict[str, int] = field(default_factory=dict)
    seconds: float | None = None  # the job's created_at → finished_at
    stored: tuple[Stored, ...] = ()
    written: dict[str, int] = field(default_factory=dict)  # the job's results by outcome (created, merged…)
    seen: tuple[Seen, ...] = ()  # everything the API returned about the subject and the job

    def missed(self) -> list[Expected]:
        return [e for e in self.dialogue.expected if not any(matches(e, s) for s in self.stored)]

    def extra(self) -> list[Stored]:
        return [s for s in self.stored if not any(matches(e, s) for e in self.dialogue.expected)]

    def leaks(self) -> list[Leak]:
        return [Leak(f, s) for f in self.dialogue.forbidden for s in self.seen if leaked(f, s.value)]


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def score_row(outcomes: Iterable[Outcome]) -> dict[str, Any]:
    """Recall and precision over ``outcomes``, with the counts behind them."""
    rows = list(outcomes)
    expected = sum(len(o.dialogue.expected) for o in rows)
    matched = expected - sum(len(o.missed()) for o in rows)
    stored = sum(len(o.stored) for o in rows)
    matching = stored - sum(len(o.extra()) for o in rows)
    return {"dialogues": len(rows), "expected": expected, "matched": matched, "recall": _ratio(matched, expected),
            "stored": stored, "matching": matching, "precision": _ratio(matching, stored)}


def summarise(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Everything the report prints, JSON-ready."""
    dropped: Counter[str] = Counter()
    written: Counter[str] = Counter()
    for o in outcomes:
        dropped.update(o.dropped)
        written.update(o.written)
    seconds = [o.seconds for o in outcomes if o.seconds is not None]
    leaks = [(o, leak) for o in outcomes for leak in o.leaks()]
    # Per field kind: how many (dialogue, forbidden string) pairs it shows, however many answers repeat it.
    by_kind = Counter(kind for _, kind in {((o.dialogue.id, leak.forbidden), leak.seen.kind) for o, leak in leaks})
    languages = [lang for lang in LANGUAGES if any(o.dialogue.language == lang for o in outcomes)]
    return {
        "by_language": {lang: score_row(o for o in outcomes if o.dialogue.language == lang) for lang in languages},
        "all": score_row(outcomes),
        "forbidden_leaks": [{"dialogue": o.dialogue.id, "forbidden": leak.forbidden, "kind": leak.seen.kind,
                             "where": leak.seen.where, "value": leak.seen.value} for o, leak in leaks],
        "leaked_strings": len({(o.dialogue.id, leak.forbidden) for o, leak in leaks}),
        "leaks_by_kind": dict(sorted(by_kind.items(), key=lambda kv: (-kv[1], kv[0]))),
        "dropped": dict(sorted(dropped.items(), key=lambda kv: (-kv[1], kv[0]))),
        "written": dict(sorted(written.items(), key=lambda kv: (-kv[1], kv[0]))),
        "jobs": {"succeeded": sum(o.state == "SUCCEEDED" for o in outcomes),
                 "failed": [{"dialogue": o.dialogue.id, "state": o.state, "error": o.error}
                            for o in outcomes if o.state != "SUCCEEDED"]},
        "seconds_per_job": {"mean": sum(seconds) / len(seconds) if seconds else None,
                            "p50": percentile(seconds, 50), "max": max(seconds, default=None)},
        "dialogues": [{"id": o.dialogue.id, "language": o.dialogue.language, "state": o.state, "error": o.error,
                       "seconds": o.seconds, "dropped": o.dropped, "written": o.written,
                       "missed": [list(e.must) for e in o.missed()], "extra": [s.text for s in o.extra()],
                       "stored": [s.__dict__ for s in o.stored]} for o in outcomes],
    }
