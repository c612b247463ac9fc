"""Reading LoCoMo (``locomo10.json``) into turns to write and questions to ask.

Pure: no I/O beyond reading the file, no server. The file's shape is described in the
dataset's README (next to ``locomo10.json``): a list of samples, each with ``sample_id``, a
``conversation`` of ``session_<N>`` turn lists and ``session_<N>_date_time`` strings, and
``qa`` items ``{question, answer, evidence, category}``.

Evidence strings are not always plain dia_ids (``"D8:6; D9:17"``, ``"D:11:26"``,
``"D30:05"``, ``"D"``, ids of turns that do not exist): they are split, repaired where the
intent is clear, and the rest are reported as unusable rather than silently dropped.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Category numbers as the LoCoMo repository's evaluation code uses them (see the dataset README).
CATEGORY_NAMES: Mapping[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop",
                                     5: "adversarial"}
SCORED_CATEGORIES: tuple[int, ...] = (1, 2, 3, 4)

_MONTHS = {name: i for i, name in enumerate(
    ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"), start=1)}
# "1:56 pm on 8 May, 2023". Parsed by hand, not with strptime: %B and %p follow the locale.
_SESSION_TIME = re.compile(r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*",
                           re.IGNORECASE)
_SESSION_KEY = re.compile(r"session_(\d+)")
_DIA_ID = re.compile(r"D:?(\d+):(\d+)", re.IGNORECASE)
_EVIDENCE_SEPARATORS = re.compile(r"[;,\s]+")
_TURN_ID_FORBIDDEN = re.compile(r"[^A-Za-z0-9._:@/-]")
_SUBJECT_FORBIDDEN = re.compile(r"[^A-Za-z0-9._:@-]")
# The contract's lengths (memoryd.domain.CONTRACT: source_turn_id, subject), written here
# because bench/mem0/ loads this file by path, without memoryd installed;
# tests/domain/test_bench_locomo.py checks they agree.
MAX_SOURCE_TURN_ID_BYTES = 128
MAX_SUBJECT_BYTES = 128


class DatasetError(ValueError):
    """The dataset file is missing or not in LoCoMo's shape."""


@dataclass(frozen=True)
class Turn:
    """One dialogue turn, as the memory it becomes."""

    dia_id: str
    source_turn_id: str
    session: int
    text: str
    valid_from: datetime | None
    speaker: str = ""  # who said it, as the dataset names them

    @property
    def tag(self) -> str:
        return f"session_{self.session}"


@dataclass(frozen=True)
class Question:
    """A question of categories 1–4 with its usable evidence (may be empty: then it is not scored)."""

    index: int
    category: int
    question: str
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class EvidenceNote:
    """An evidence string that was not a plain dia_id of this conversation."""

    sample_id: str
    question_index: int
    raw: str
    usable: tuple[str, ...]
    unusable: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    skipped: Mapping[int, int] = field(default_factory=dict)
    evidence_notes: tuple[EvidenceNote, ...] = ()
    undated_sessions: tuple[int, ...] = ()
    # Evidence ids of the scored questions after splitting: distinct usable ones plus unusable ones.
    evidence_ids: int = 0

    @property
    def unusable_evidence(self) -> int:
        return sum(len(note.unusable) for note in self.evidence_notes)

    @property
    def speakers(self) -> tuple[str, ...]:
        """Who speaks, in the order they first do."""
        return tuple(dict.fromkeys(t.speaker for t in self.turns if t.speaker))

    def renamed(self, question: str, other: Conversation) -> str:
        """``question`` with this conversation's speakers named as ``other``'s, in order of
        first appearance (its first speaker becomes the other's first): a question about
        ``other``'s people that nothing of theirs answers."""
        names = dict(zip(self.speakers, other.speakers))
        if not names:
            return question
        pattern = re.compile("|".join(rf"\b{re.escape(name)}\b" for name in names))
        return pattern.sub(lambda match: names[match.group()], question)  # one pass: no renamed name renamed again


def parse_session_time(value: object) -> datetime | None:
    """``"1:56 pm on 8 May, 2023"`` → 2023-05-08 13:56 UTC; None if it does not parse.

    The data gives no time zone; UTC is assumed."""
    if not isinstance(value, str):
        return None
    match = _SESSION_TIME.fullmatch(value)
    if not match:
        return None
    hour, minute, half, day, month_name, year = match.groups()
    month = _MONTHS.get(month_name.lower())
    if month is None or not 1 <= int(hour) <= 12:
        return None
    hour24 = int(hour) % 12 + (12 if half.lower() == "p" else 0)
    try:
        return datetime(int(year), month, int(day), hour24, int(minute), tzinfo=UTC)
    except ValueError:
        return None


def canonical_dia_id(token: str) -> str | None:
    """``"D1:3"``, ``"D:1:3"``, ``"D1:03"`` → ``"D1:3"``; None if the token is not a dia_id."""
    match = _DIA_ID.fullmatch(token.strip())
    return f"D{int(match.group(1))}:{int(match.group(2))}" if match else None


def split_evidence(raw: str) -> tuple[list[str], list[str]]:
    """One evidence string → (canonical dia_ids, tokens that are not dia_ids)."""
    ids: list[str] = []
    bad: list[str] = []
    tokens = [t for t in _EVIDENCE_SEPARATORS.split(raw.strip()) if t]
    for token in tokens or [raw]:
        canonical = canonical_dia_id(token)
        if canonical is None:
            bad.append(token)
        else:
            ids.append(canonical)
    return ids, bad


def sanitise_turn_id(dia_id: str) -> str:
    """A dia_id in the alphabet and length ``source_turn_id`` allows."""
    return _TURN_ID_FORBIDDEN.sub("_", dia_id)[:MAX_SOURCE_TURN_ID_BYTES] or "_"


def subject_for(prefix: str, sample_id: str) -> str:
    """The subject a conversation is written to, e.g. ``locomo-conv-26``."""
    subject = _SUBJECT_FORBIDDEN.sub("_", f"{prefix}-{sample_id}" if prefix else sample_id)
    return subject[:MAX_SUBJECT_BYTES]


def turn_text(turn: Mapping[str, Any]) -> str:
    """``"<speaker>: <text>"``, plus ``" [shares <caption>]"`` for a turn with an image caption."""
    text = f"{str(turn.get('speaker', '')).strip()}: {str(turn.get('text', '')).strip()}"
    caption = str(turn.get("blip_caption") or "").strip()
    return f"{text} [shares {caption}]" if caption else text


def _sessions(conversation: Mapping[str, Any]) -> list[int]:
    # Enumerate sessions from the turn lists: conv-26 has date keys of sessions it does not have.
    numbers = [int(m.group(1)) for key, value in conversation.items()
               if (m := _SESSION_KEY.fullmatch(key)) and isinstance(value, list)]
    return sorted(numbers)


def parse_conversation(sample: Mapping[str, Any]) -> Conversation:
    """One LoCoMo sample → its turns and its questions of categories 1–4."""
    try:
        sample_id = str(sample["sample_id"])
        conversation = sample["conversation"]
        qa = sample["qa"]
    except (KeyError, TypeError) as exc:
        raise DatasetError(f"a sample lacks {exc}: not LoCoMo's shape") from None
    turns: list[Turn] = []
    undated: list[int] = []
    by_canonical: dict[str, str] = {}
    by_turn_id: dict[str, str] = {}
    for session in _sessions(conversation):
        when = parse_session_time(conversation.get(f"session_{session}_date_time"))
        if when is None:
            undated.append(session)
        for raw in conversation[f"session_{session}"]:
            dia_id = str(raw["dia_id"])
            canonical = canonical_dia_id(dia_id) or dia_id
            source_turn_id = sanitise_turn_id(dia_id)
            if canonical in by_canonical or source_turn_id in by_turn_id:
                raise DatasetError(f"{sample_id}: turn id {dia_id!r} appears twice")
            by_canonical[canonical] = dia_id
            by_turn_id[source_turn_id] = dia_id
            turns.append(Turn(dia_id, source_turn_id, session, turn_text(raw), when,
                              str(raw.get("speaker", "")).strip()))
    questions: list[Question] = []
    notes: list[EvidenceNote] = []
    skipped: Counter[int] = Counter()
    evidence_ids = 0
    for index, item in enumerate(qa):
        category = int(item["category"])
        if category not in SCORED_CATEGORIES:
            skipped[category] += 1
            continue
        evidence: list[str] = []
        for raw_evidence in item.get("evidence") or []:
            ids, bad = split_evidence(str(raw_evidence))
            usable = [by_canonical[i] for i in ids if i in by_canonical]
            unusable = bad + [i for i in ids if i not in by_canonical]
            if unusable or usable != [str(raw_evidence)]:
                notes.append(EvidenceNote(sample_id, index, str(raw_evidence), tuple(usable), tuple(unusable)))
            evidence_ids += len(unusable)
            evidence.extend(usable)
        distinct = tuple(dict.fromkeys(evidence))  # conv-50 lists one id twice in a question
        evidence_ids += len(distinct)
        questions.append(Question(index, category, str(item["question"]), distinct))
    return Conversation(sample_id, tuple(turns), tuple(questions), dict(skipped), tuple(notes), tuple(undated),
                        evidence_ids)


def load_locomo(path: Path) -> list[Conversation]:
    """Read and parse the whole dataset file."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"LoCoMo dataset not found at {path}; pass --dataset PATH") from None
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path} is not JSON: {exc}") from None
    if not isinstance(document, list) or not document:
        raise DatasetError(f"{path}: expected a non-empty JSON list of conversations")
    return [parse_conversation(sample) for sample in document]


def select_conversations(conversations: Sequence[Conversation], spec: str | None) -> list[Conversation]:
    """``None``/``""`` → all; ``"3"`` → the first three; ``"0,3"`` or ``"conv-26,conv-30"`` → those
    (0-based positions in the file, or sample ids)."""
    if spec is None or not spec.strip():
        return list(conversations)
    spec = spec.strip()
    if "," not in spec and spec.isdigit():
        count = int(spec)
        if not 1 <= count <= len(conversations):
            raise DatasetError(f"--conversations {count}: the dataset has {len(conversations)} conversations")
        return list(conversations[:count])
    chosen: list[Conversation] = []
    ids = {c.sample_id: c for c in conversations}
    for part in (p.strip() for p in spec.split(",")):
        if part.isdigit() and int(part) < len(conversations):
            conversation = conversations[int(part)]
        elif part in ids:
            conversation = ids[part]
        else:
            raise DatasetError(f"--conversations: {part!r} is neither a position 0–{len(conversations) - 1} "
                               f"nor a sample id ({', '.join(ids)})")
        if conversation not in chosen:
            chosen.append(conversation)
    return chosen


def default_dataset_candidates(cwd: Path, package_file: Path) -> list[Path]:
    """Where ``locomo10.json`` is looked for without ``--dataset``: ``../shared/datasets/locomo/``
    next to the repository that holds this package, then next to the current directory and its
    parents. The repository root is the first folder upward with a ``pyproject.toml`` whose
    parent has none (``bench/``, the benchmarks' own distribution, has one inside it)."""
    relative = Path("..", "shared", "datasets", "locomo", "locomo10.json")
    roots: list[Path] = []
    for start in (package_file.resolve().parent, cwd.resolve()):
        for folder in (start, *start.parents):
            if (folder / "pyproject.toml").is_file() and not (folder.parent / "pyproject.toml").is_file():
                roots.append(folder)
                break
    roots.append(cwd.resolve())
    candidates: list[Path] = []
    for root in roots:
        candidate = (root / relative).resolve()
        if candidate not in candidates:
            candidates.append(candidate)
    return candidates


def resolve_dataset(explicit: str | None, cwd: Path, package_file: Path) -> Path:
    """``--dataset`` if given (must exist), else the first default candidate that exists."""
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise DatasetError(f"LoCoMo dataset not found at {path}")
        return path
    candidates = default_dataset_candidates(cwd, package_file)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    tried = "\n  ".join(str(c) for c in candidates)
    raise DatasetError(f"LoCoMo dataset (locomo10.json) not found; looked in:\n  {tried}\n"
                       "pass --dataset PATH (the data is not in this repository: CC BY-NC 4.0, see bench/README.md)")


# MADial-Bench (MIT; ``shared/datasets/madial-bench``, never copied here): the dialogues and the
# memory archive in each language, under its folder (``memoryd bench injections``).
MADIAL_DIALOGUES = {"zh": Path("data", "ch", "MADial-Bench-zh-dialogue.json"),
                    "en": Path("data", "en", "MADial-Bench-en-dialogue.json")}
MADIAL_MEMORIES = {"zh": Path("data", "ch", "MADial-Bench-zh-memory.json"),
                   "en": Path("data", "en", "MADial-Bench-en-memory.json")}
