"""An answer cut off part-way (a model that loops until ``max_tokens``): the complete items
before the cut are kept, the one the cut went through never is, and the cut is counted."""

from __future__ import annotations

import json

import pytest

from memoryd.server.ingest._chat import answer_document
from memoryd.server.ingest._chat_errors import ExtractionParseError
from memoryd.server.ingest._extraction_llm import parse_items


def cut(content: str, finish: str = "length") -> bytes:
    return json.dumps({"choices": [{"finish_reason": finish,
                                    "message": {"role": "assistant", "content": content}}]}).encode()


def item(text: str, **fields: object) -> dict[str, object]:
    return {"category": "event", "key": "", "text": text, "importance": 0.6, "confidence": 0.9,
            "stability": "stable", "sensitive": "none", "entities": [], "source_turn_ids": ["t1"], "tags": [],
            **fields}


def parsed(raw: bytes):
    return parse_items(answer_document(raw, 64, salvage="items"))


FIRST, SECOND = item("Alice adopted a cat"), item('Alice said "hi" to Bob {twice} [sic]')
WHOLE = json.dumps({"items": [FIRST, SECOND]}, ensure_ascii=False)


@pytest.mark.parametrize("cut_at", [
    pytest.param('"text": "Alice ado', id="in-a-string"),
    pytest.param('"importance": 0.', id="in-a-number"),
    pytest.param('"entities": ["Ly', id="in-a-list"),
    pytest.param('"tags": []', id="before-the-items-end"),
    pytest.param("", id="right-after-the-comma"),
])
def test_the_complete_items_before_a_cut_are_kept_and_the_half_one_is_counted(cut_at):
    half = json.dumps(item("Alice adopted a dog"))
    head = half[:half.index(cut_at.split(":")[0])] + cut_at if cut_at else ""
    content = WHOLE[:-2] + ", " + head  # the list and the document left open
    items, invalid = parsed(cut(content))
    assert [i.text for i in items] == ["Alice adopted a cat", 'Alice said "hi" to Bob {twice} [sic]']
    assert invalid == {"cut_off": 1}


def test_a_half_item_is_never_kept_even_when_it_holds_a_whole_text():
    # Everything an item needs but its closing brace: not an item.
    content = json.dumps({"items": [FIRST]})[:-2] + ", " + json.dumps(item("Alice adopted a dog"))[:-1]
    items, invalid = parsed(cut(content))
    assert [i.text for i in items] == ["Alice adopted a cat"] and invalid == {"cut_off": 1}


def test_a_loop_cut_at_max_tokens_keeps_what_came_before_it():
    loop = ", ".join(json.dumps(item("Alice likes tea")) for _ in range(3))
    content = '{"items": [' + json.dumps(FIRST) + ", " + loop + ', {"category": "event", "text": "Alice likes t'
    items, invalid = parsed(cut(content))
    assert len(items) == 4 and invalid == {"cut_off": 1}  # the filters downstream judge the repeats


def test_json_that_ends_open_without_a_finish_reason_is_salvaged_too():
    items, invalid = parsed(cut(WHOLE[:-2] + ', {"category": "ev', finish="stop"))
    assert len(items) == 2 and invalid == {"cut_off": 1}


def test_a_cut_after_the_list_closed_loses_nothing():
    items, invalid = parsed(cut(WHOLE[:-1]))
    assert len(items) == 2 and not invalid


@pytest.mark.parametrize("content", [
    pytest.param('{"items": [{"category": "fact", "text": "Alice li', id="no-complete-item"),
    pytest.param('{"items": [', id="nothing-in-the-list"),
    pytest.param('{"memories": [' + json.dumps(FIRST) + ", {", id="no-items-list"),
    pytest.param("Alice lives in Lyon and likes", id="prose"),
])
def test_a_cut_answer_with_no_complete_item_still_fails(content):
    with pytest.raises(ExtractionParseError) as raised:
        parsed(cut(content))
    assert "cut off at max_tokens (64)" in raised.value.message


def test_json_broken_in_the_middle_is_not_taken_for_a_cut():
    content = '{"items": [' + json.dumps(FIRST) + ", oops}]}"
    with pytest.raises(ExtractionParseError):
        parsed(cut(content, finish="stop"))


def test_without_salvage_a_cut_answer_fails_as_before():
    with pytest.raises(ExtractionParseError):
        answer_document(cut(WHOLE[:-2] + ", {"), 64)
