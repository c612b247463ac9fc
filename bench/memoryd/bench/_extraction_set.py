"""The extraction benchmark's dialogue set, and its scoring: a pure module, no I/O but reading the set.

The set (``bench/extraction/dialogues.json``) holds invented dialogues, each with:

- ``turns``: turn id, speaker, text, time (ISO 8601 with its offset);
- ``expected``: the memories a good extraction keeps — a category (or a list of acceptable
  ones), for profile categories a key (or a list of acceptable keys), and ``must``: strings
  the stored text contains (an absolute date is what the relative phrase resolves to);
- ``forbidden``: strings no memory stored for the dialogue may contain (identity and
  financial numbers, injection phrases, passing states);
- ``scripted_answer``: what ``--scripted``'s stand-in model answers for it (sloppy on purpose).

Matching folds both sides with NFKC and casefold. An expected memory is matched by a stored
one of an accepted category (and key, when given) whose text contains every ``must`` string;
a stored memory is *matching* when it matches some expected memory of its dialogue. Recall is
matched expected ÷ expected, precision matching stored ÷ stored; neither pairs memories one
to one (two stored memories that say one expected thing both count as matching). A forbidden
string of 6 digits or more also leaks when it appears with its spaces and dashes removed.
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

from ._locomo import BenchError
from ._metrics import percentile

DEFAULT_DIALOGUES = Path(__file__).resolve().parents[3] / "bench" / "extraction" / "dialogues.json"
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
    return Dialogue(str(raw["id"]), raw["language"], tuple(turns), expected, forbidden, raw["scripted_answer"])


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


_SEPARATORS = re.compile(r"[\s\-]")


def leaked(forbidden: str, stored: Stored) -> bool:
    """Whether ``stored`` holds ``forbidden`` (in its text or key)."""
    text, wanted = fold(f"{stored.key} {stored.text}"), fold(forbidden)
    if wanted in text:
        return True
    bare = _SEPARATORS.sub("", wanted)
    return sum(c.isdigit() for c in bare) >= 6 and bare in _SEPARATORS.sub("", text)


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

    def missed(self) -> list[Expected]:
        return [e for e in self.dialogue.expected if not any(matches(e, s) for s in self.stored)]

    def extra(self) -> list[Stored]:
        return [s for s in self.stored if not any(matches(e, s) for e in self.dialogue.expected)]

    def leaks(self) -> list[tuple[str, Stored]]:
        return [(f, s) for f in self.dialogue.forbidden for s in self.stored if leaked(f, s)]


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
    languages = [lang for lang in LANGUAGES if any(o.dialogue.language == lang for o in outcomes)]
    return {
        "by_language": {lang: score_row(o for o in outcomes if o.dialogue.language == lang) for lang in languages},
        "all": score_row(outcomes),
        "forbidden_leaks": [{"dialogue": o.dialogue.id, "forbidden": f, "text": s.text}
                            for o in outcomes for f, s in o.leaks()],
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
