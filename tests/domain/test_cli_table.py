"""The CLI's one table renderer (memoryd.cli._table): what a person sees at a terminal of a given
width — every row within the width, texts cut with …, CJK characters counted as the two cells
a terminal draws, and ids always whole."""

from __future__ import annotations

import pytest

from memoryd.cli._table import Column, cell_width, clip, render

ID = "d0f1f801-af15-42d0-91d6-e9ec67d7974c"
COLUMNS = [Column("id"), Column("category"), Column("text", cut=True)]


def test_a_table_that_fits_shows_every_value_whole_under_its_header():
    lines = render(COLUMNS, [[ID, "fact", "Alice lives in Lisbon"]], width=120).splitlines()
    assert lines[0].split() == ["id", "category", "text"]
    assert lines[2].split() == [ID, "fact", "Alice", "lives", "in", "Lisbon"]


@pytest.mark.parametrize("width", [100, 72, 60, 40], ids=["100", "72", "60", "40"])
def test_a_long_text_is_cut_to_the_width_and_the_id_stays_whole(width):
    text = "Alice prefers oolong tea in the morning and green tea in the afternoon, " * 3
    lines = render(COLUMNS, [[ID, "preference", text]], width=width).splitlines()
    assert lines[2].startswith(ID + "  preference  Alice")
    if width >= len(ID) + len("  preference  ") + 8:
        assert all(cell_width(line) <= width for line in lines)
    assert lines[2].endswith("…")


def test_cjk_text_is_measured_in_terminal_cells():
    assert cell_width("乌龙茶") == 6 and cell_width("tea") == 3 and cell_width("e\u0301") == 1
    assert clip("爱丽丝喜欢喝乌龙茶", 9) == "爱丽丝喜…"  # 8 cells of text and the ellipsis
    lines = render(COLUMNS, [[ID, "preference", "爱丽丝喜欢喝乌龙茶，每天早上都要泡一壶"], [ID, "fact", "Lisbon"]],
                   width=70).splitlines()
    # 36 cells of id, 10 of category, two gaps: 20 left, 9 characters (18 cells) and the ellipsis.
    assert lines[2].endswith("爱丽丝喜欢喝乌龙茶…") and max(cell_width(line) for line in lines) <= 70
    # The columns after a CJK cell line up with those after a Latin one.
    assert lines[2].index("爱") == lines[3].index("Lisbon")


def test_text_on_several_lines_is_shown_on_one():
    assert render(COLUMNS, [[ID, "fact", "first line\nsecond\tline"]], width=120).splitlines()[2].endswith(
        "first line second line")
