"""TURN_MODE_CHUNK's splitter, on its own: sizes, speaker boundaries, sentences kept whole."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memoryd.domain import Category, SourceKind, Turn
from memoryd.server.ingest._chunking import MAX_CHARS, MIN_CHARS, chunk_drafts, chunk_turns

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
EN = ("I moved to Berlin last spring because of a new job at a robotics startup. The first months were hard, "
      "mostly because of the language. Now I take German classes twice a week and it is getting better. My "
      "sister visited in August and we cycled along the Spree for a whole day. Next year I want to run the Berlin "
      "marathon, so I started training in the mornings before work. I also joined a running club in Kreuzberg.")
ZH = ("我去年春天因为在一家机器人创业公司的新工作搬到了柏林。头几个月很难，主要是因为语言。现在我每周上两次德语课，情况越来越好了。"
      "我妹妹八月来看我，我们沿着施普雷河骑了一整天自行车。明年我想跑柏林马拉松，所以我开始在上班前的早上训练。"
      "我还加入了十字山的一个跑步俱乐部。每个周末我们都会一起跑二十公里，然后去吃早午餐。")


def turn(turn_id: str, speaker: str, text: str, minutes: int = 0) -> Turn:
    return Turn(turn_id, speaker, text, T0 + timedelta(minutes=minutes))


def sentences(text: str) -> list[str]:
    import re

    return [s for s in re.split(r"(?<=[.!?])\s+|(?<=[。！？])", text) if s]


@pytest.mark.parametrize("text", [EN, ZH, EN * 3, ZH * 3], ids=["english", "chinese", "english-long", "chinese-long"])
def test_long_turns_become_chunks_of_100_to_300_characters_cut_between_sentences(text):
    chunks = chunk_turns([turn("t1", "user", text)])
    assert len(chunks) >= max(1, len(text) // MAX_CHARS)
    assert all(MIN_CHARS <= len(c.text) <= MAX_CHARS for c in chunks), [len(c.text) for c in chunks]
    for chunk in chunks:
        body = chunk.text.removeprefix("user: ")
        assert chunk.text.startswith("user: ")
        # Every sentence of the turn is whole in exactly one chunk.
        assert all(s in body for s in sentences(body))
    rebuilt = "".join(c.text.removeprefix("user: ") for c in chunks).replace(" ", "")
    assert rebuilt == text.replace(" ", "")


def test_a_change_of_speaker_always_starts_a_new_chunk_and_short_turns_of_one_speaker_are_packed():
    turns = [turn("t1", "user", "I love hiking."), turn("t2", "user", "Mostly in the Alps.", 1),
             turn("t3", "assistant", "Which trail did you like best?", 2), turn("t4", "user", "The Eiger trail.", 3)]
    chunks = chunk_turns(turns)
    assert [(c.speaker, c.turn_ids) for c in chunks] == [
        ("user", ("t1", "t2")), ("assistant", ("t3",)), ("user", ("t4",))]
    assert chunks[0].text == "user: I love hiking. Mostly in the Alps."
    assert [c.time for c in chunks] == [T0, T0 + timedelta(minutes=2), T0 + timedelta(minutes=3)]


def test_chinese_sentences_are_joined_without_spaces_and_counted_in_characters():
    chunks = chunk_turns([turn("t1", "小王", ZH)])
    assert all(" " not in c.text.removeprefix("小王: ") for c in chunks)
    assert all(len(c.text) <= MAX_CHARS for c in chunks)
    assert len(ZH.encode()) > 3 * len(ZH) - 10  # bytes would have cut these three times smaller


def test_a_sentence_longer_than_a_chunk_is_cut_at_clauses_then_between_words_never_inside_one():
    words = " ".join(f"word{i}" for i in range(120))  # one 800-character sentence, no punctuation
    chunks = chunk_turns([turn("t1", "user", words)])
    assert all(len(c.text) <= MAX_CHARS for c in chunks)
    pieces = [w for c in chunks for w in c.text.removeprefix("user: ").split()]
    assert pieces == words.split()


def test_chunks_become_event_drafts_dated_tagged_and_traced_to_their_first_turn():
    drafts = chunk_drafts([turn("t1", "user", "I love hiking."), turn("t2", "user", "Mostly in the Alps.", 5)])
    assert len(drafts) == 1
    draft = drafts[0]
    assert (draft.category, draft.source_kind, draft.source_turn_id) == (Category.EVENT, SourceKind.INPUT, "t1")
    assert draft.tags == ("t1", "t2") and draft.valid_from == T0 and draft.key == ""
