"""Reading MADial-Bench: its memory archive and its dialogues in each language, and a dialogue's
lines as turns (who said what).

Pure: reads the files, no server. The data (MIT) lies in ``shared/datasets/madial-bench`` and is
never copied into this repository. Every ``.json`` file of it is JSON Lines despite its name:

- the archive, one memory a line: ``{"<id>": {time, scene, emotion, event, user-id, id}}``; the
  English lines carry no ``user-id`` (nor ``id``);
- the dialogues, one a line, aligned by line across the languages (the same dialogue, translated):
  ``{dialogue: [lines], test-turn: [indices], relevant-id: [ids], user-id}``.

Memory ids 1-160 are the same memories in both languages; zh 161-171 have no English version.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._dataset import MADIAL_DIALOGUES, MADIAL_MEMORIES, DatasetError, resolve_dataset

LANGUAGES = ("zh", "en")
ASSISTANT = "Assistant"  # as the dialogues name the assistant: <Assistant>
_MARKERS = frozenset({"<BOD>", "<EOD>"})  # a dialogue's first and last line
_LABELLED = re.compile(r"<([^<>:：]{1,64})>\s*[:：]\s*(.*)", re.DOTALL)
_OPENING, _CLOSING = "\"“「", "\"”」"


@dataclass(frozen=True)
class Memory:
    id: int
    user: int
    time: str  # as in the archive: "2023-12-25"
    event: str

    @property
    def text(self) -> str:
        """What is written: ``[2023-12-25] Bart danced at the Christmas party and felt very happy.``"""
        return f"[{self.time}] {self.event}"


@dataclass(frozen=True)
class Said:
    """One turn of a dialogue."""
    speaker: str  # as the dialogue names them: "Bart", "Lisa", "Assistant"
    text: str


@dataclass(frozen=True)
class Dialogue:
    index: int  # its line in the file: the same dialogue in both languages
    user: int
    lines: tuple[str, ...]
    test_turn: int  # the first test turn: the Assistant line that should bring a memory up
    relevant: tuple[int, ...]

    @property
    def history(self) -> str:
        """The authors' query: the lines before the first test turn, joined as they are."""
        return "".join(self.lines[:self.test_turn])

    def turns(self) -> list[Said]:
        """The same lines as turns."""
        return parse_lines(self.lines[:self.test_turn])


def _unquote(text: str) -> str:
    text = text.strip()
    if text[:1] and text[0] in _OPENING:
        text = text[1:]
    if text[-1:] and text[-1] in _CLOSING:
        text = text[:-1]
    return text.strip()


def parse_lines(lines: Sequence[str]) -> list[Said]:
    """A dialogue's lines as turns. Most are ``<Name>:"text"`` (zh mostly without a space after
    the colon, en with one; either quote style, ascii or full-width, is taken), but not all: 61
    zh lines start with a space, 9 lines lack the opening quote, and 35 English assistant lines
    lost their ``<Assistant>:`` (the text bare, quoted, or in angle brackets). An unlabelled line
    is the other party's turn: the dialogues alternate."""
    user = next((m.group(1).strip() for line in lines if (m := _LABELLED.fullmatch(line.strip()))
                 and m.group(1).strip() != ASSISTANT), "user")
    said: list[Said] = []
    for raw in lines:
        line = raw.strip()
        if not line or line in _MARKERS:
            continue
        labelled = _LABELLED.fullmatch(line)
        if labelled:
            speaker, text = labelled.group(1).strip(), labelled.group(2)
        else:
            speaker = user if said and said[-1].speaker == ASSISTANT else ASSISTANT if said else user
            text = line[1:-1] if line.startswith("<") and line.endswith(">") else line
        text = _unquote(text)
        if text:
            said.append(Said(speaker, text))
    return said


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except ValueError as exc:
                        raise DatasetError(f"{path}:{number}: not a JSON line: {exc}") from None
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc}") from None


def load_memories(folder: Path, language: str) -> dict[int, Memory]:
    """The archive in ``language``, by id, in the file's order."""
    raw: dict[int, dict[str, Any]] = {}
    for line in _lines(folder / MADIAL_MEMORIES[language]):
        raw.update({int(key): value for key, value in line.items()})
    users = {i: m.get("user-id") for i, m in raw.items()}
    if language != "zh":
        # The English lines carry no user-id: the zh archive's, by id (ids 1-160 are the same
        # memories in both languages).
        users = {i: m.user for i, m in load_memories(folder, "zh").items()}
    memories = {}
    for i, m in raw.items():
        user = users.get(i)
        if user is None or not str(m.get("event", "")).strip():
            raise DatasetError(f"{folder / MADIAL_MEMORIES[language]}: memory {i} has no user or no event")
        memories[i] = Memory(i, int(user), str(m.get("time", "")).strip(), str(m["event"]).strip())
    return memories


def load_dialogues(folder: Path, language: str) -> list[Dialogue]:
    dialogues = []
    for index, line in enumerate(_lines(folder / MADIAL_DIALOGUES[language])):
        try:
            dialogues.append(Dialogue(index, int(line["user-id"]), tuple(str(s) for s in line["dialogue"]),
                                      int(line["test-turn"][0]), tuple(int(i) for i in line["relevant-id"])))
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise DatasetError(f"{folder / MADIAL_DIALOGUES[language]}: dialogue {index}: {exc!r}") from None
    return dialogues


def shared_gold(zh: Sequence[Dialogue], en: Sequence[Dialogue]) -> tuple[int, ...]:
    """The dialogues asked across languages: those whose gold ids agree in both languages and all
    have an English version (≤ 160): 152 of 160."""
    return tuple(a.index for a, b in zip(zh, en, strict=True)
                 if a.relevant == b.relevant and a.user == b.user and max(a.relevant) <= 160)


def _has_madial(folder: Path) -> bool:
    return all((folder / name).is_file() for name in (*MADIAL_DIALOGUES.values(), *MADIAL_MEMORIES.values()))


def find_madial(explicit: str | None, locomo: Path | None = None) -> Path | None:
    """The MADial-Bench folder: ``explicit`` if given (it must hold the files), else
    ``madial-bench`` beside LoCoMo's folder (``locomo``'s, or found as ``bench locomo`` finds it)
    when it is there, else None."""
    if explicit:
        folder = Path(explicit).expanduser()
        if not _has_madial(folder):
            raise DatasetError(f"MADial-Bench's data/ch and data/en files not found under {folder}")
        return folder
    try:
        locomo = locomo or resolve_dataset(None, Path.cwd(), Path(__file__))
    except DatasetError:
        return None
    beside = locomo.resolve().parent.parent / "madial-bench"
    return beside if _has_madial(beside) else None
