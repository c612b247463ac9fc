"""The one table renderer of the CLI: columns fitted to the terminal's width, measured as a
terminal draws them (a CJK character takes two cells, a combining mark none), long text cut
with ``…``.

A column is either cut to fit (``Column(cut=True)``: memory texts, keys) or shown whole: ids are
never shortened, because an operator copies them into the next command — a table too wide for
the terminal keeps them whole and shrinks the columns that may be cut instead.
"""

from __future__ import annotations

import os
import shutil
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

ELLIPSIS = "…"
GAP = "  "
# A column that may be cut keeps at least this many cells, however narrow the terminal.
MIN_CUT_WIDTH = 8


@dataclass(frozen=True)
class Column:
    header: str
    cut: bool = False  # may be cut with … to fit the width; otherwise always shown whole


def terminal_width() -> int:
    """$COLUMNS, else the width of the terminal standard output, error or input is on (``--table |
    less`` still fits the terminal less draws on), else 80."""
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    for stream in (sys.__stdout__, sys.__stderr__, sys.__stdin__):
        try:
            return os.get_terminal_size(stream.fileno()).columns if stream is not None else 80
        except (OSError, ValueError):
            continue
    return shutil.get_terminal_size().columns


def cell_width(text: str) -> int:
    """How many terminal cells ``text`` takes."""
    return sum(_char_width(char) for char in text)


def _char_width(char: str) -> int:
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def clip(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells: whole if it fits, else cut and ended with …."""
    if cell_width(text) <= width:
        return text
    kept, used = [], 0
    for char in text:
        size = _char_width(char)
        if used + size > width - 1:
            break
        kept.append(char)
        used += size
    return "".join(kept) + ELLIPSIS


def one_line(text: str) -> str:
    """A cell's text on one line (a memory's text may hold newlines and tabs)."""
    return " ".join(text.split())


def render(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int | None = None) -> str:
    """The rows under their headers, fitted to ``width`` cells (default: the terminal's)."""
    total = width if width is not None else terminal_width()
    cells = [[one_line(value) for value in row] for row in rows]
    natural = [max([cell_width(c.header), *(cell_width(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    widths = _fit(columns, natural, total - len(GAP) * (len(columns) - 1))
    lines = [_line([c.header for c in columns], widths), _line(["─" * w for w in widths], widths)]
    lines += [_line(row, widths) for row in cells]
    return "\n".join(lines)


def _fit(columns: Sequence[Column], natural: list[int], room: int) -> list[int]:
    """Each column's width: whole columns keep theirs, the ones that may be cut share the rest,
    the narrowest first taking no more than it needs."""
    widths = list(natural)
    cut = sorted((i for i, c in enumerate(columns) if c.cut), key=lambda i: natural[i])
    left = room - sum(natural[i] for i, c in enumerate(columns) if not c.cut)
    for n, i in enumerate(cut):
        share = left // (len(cut) - n)
        widths[i] = max(min(natural[i], share), min(natural[i], MIN_CUT_WIDTH))
        left -= widths[i]
    return widths


def _line(values: Sequence[str], widths: Sequence[int]) -> str:
    padded = [clip(value, width) for value, width in zip(values, widths, strict=True)]
    padded = [value + " " * (width - cell_width(value)) for value, width in zip(padded, widths, strict=True)]
    return GAP.join(padded).rstrip()
