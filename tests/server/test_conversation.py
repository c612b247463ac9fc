"""What a recall from a conversation searches with (``memoryd.server.recall._conversation``): the
dialogue a query pastes in is read as turns, the latest user turn is the focus, the user's
earlier turns follow it newest first, and the text the embedder gets stays bounded however long
the conversation is."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memoryd.domain import Turn
from memoryd.server.recall._conversation import MEANING_COST, SHORTEST, WORDS_COST, _cost, search_for, spoken

NOW = datetime(2026, 12, 5, tzinfo=UTC)


def turns(*said: tuple[str, str]) -> list[Turn]:
    return [Turn(f"t{i}", speaker, text, NOW) for i, (speaker, text) in enumerate(said)]


@pytest.mark.parametrize("query, expected", [
    pytest.param('<BOD>\n<Bart>: "I won the race!"\n<Assistant>: "Well done!"\n<Bart>: "What should I eat now?"\n',
                 [("Bart", "I won the race!"), ("Assistant", "Well done!"), ("Bart", "What should I eat now?")],
                 id="madial-english"),
    pytest.param('<BOD>\n<Bart>:"我赢了比赛！"\n<Assistant>:"真棒！"\n', [("Bart", "我赢了比赛！"), ("Assistant", "真棒！")],
                 id="madial-chinese"),
    pytest.param("user: hi\nassistant: hello, how can I help?\nuser: what did I buy\nin Lyon?",
                 [("user", "hi"), ("assistant", "hello, how can I help?"), ("user", "what did I buy in Lyon?")],
                 id="continued-line"),
    pytest.param("用户：你好\n助手：你好！\n", [("用户", "你好"), ("助手", "你好！")], id="full-width-colon"),
])
def test_a_dialogue_pasted_as_query_is_read_as_turns(query: str, expected: list[tuple[str, str]]):
    assert spoken(query) == expected


@pytest.mark.parametrize("query", [
    pytest.param("Note: what did Ana say about Lyon?", id="one-line-with-a-colon"),
    pytest.param("Dear Ana:\nplease bring the milk\nand the bread\nthanks", id="a-letter"),
    pytest.param("user: hello\nuser: anyone?", id="one-speaker"),
    pytest.param("When did Caroline go to the support group?", id="a-question"),
])
def test_other_text_is_not_a_dialogue(query: str):
    assert spoken(query) is None
    search = search_for(query)
    assert search.meaning == search.focus == search.words == search.names == query and not search.conversation


def test_the_latest_user_turn_leads_and_earlier_user_turns_follow_newest_first():
    search = search_for("", turns(("user", "My daughter Mia started the cello in May."),
                                  ("assistant", "How lovely! How is she finding it?"),
                                  ("user", "She loves it. Which teacher did we pick for her?")))
    assert search.conversation
    assert search.meaning.splitlines() == ["She loves it. Which teacher did we pick for her?",
                                           "My daughter Mia started the cello in May."]
    # The focus is embedded on its own as well, so a change of topic cannot bury it.
    assert search.focus == "She loves it. Which teacher did we pick for her?"
    # The entity lookup also reads the assistant's turn the latest one answers; the meaning and
    # the keywords do not.
    assert "How is she finding it?" in search.names
    assert "How is she" not in search.meaning and "How is she" not in search.words


def test_a_query_beside_a_context_is_the_focus():
    search = search_for("and the teacher's name?", turns(("user", "Mia started the cello in May."),
                                                         ("assistant", "Lovely!")))
    assert search.meaning.splitlines() == ["and the teacher's name?", "Mia started the cello in May."]
    assert search.names.splitlines() == ["and the teacher's name?", "Mia started the cello in May.", "Lovely!"]


def test_the_same_turns_as_context_or_as_query_text_search_alike():
    said = [("user", "We drove to the coast last weekend."), ("assistant", "Sounds fun!"),
            ("user", "What was the name of that fish restaurant?")]
    as_text = "\n".join(f"{speaker}: {text}" for speaker, text in said)
    assert search_for(as_text) == search_for("", turns(*said))


def test_only_the_assistant_spoke():
    assert search_for("", turns(("assistant", "Do you remember your trip to Lyon?"))).meaning == \
        "Do you remember your trip to Lyon?"


def test_the_embedded_text_is_bounded_however_long_the_conversation():
    long_turn = "We talked about the garden, the roses and the new greenhouse for a long while. " * 20
    many = turns(*[("user" if i % 2 else "assistant", f"{i}: {long_turn}") for i in range(50)])
    search = search_for("", many)
    assert _cost(search.meaning) <= MEANING_COST
    assert _cost(search.words) <= WORDS_COST
    chinese = turns(*[("user", "我们聊了很久花园、玫瑰和新的温室。" * 30)] * 50)
    assert _cost(search_for("", chinese).meaning) <= MEANING_COST


def test_a_turn_that_does_not_fit_is_cut_at_a_word_or_left_out():
    earlier = "I went to the market in Lyon and bought cheese, bread and olives for the picnic " * 2
    focus = "y" * 90 + " tell me about it"
    lines = search_for("", turns(("user", earlier), ("user", focus))).meaning.splitlines()
    assert lines[0] == focus
    assert earlier.startswith(lines[1]) and earlier[len(lines[1])] == " "  # ends at a word
    assert SHORTEST <= _cost(lines[1]) <= MEANING_COST - _cost(focus)
    # With too little left to say anything, the earlier turn is left out.
    tight = "z" * (MEANING_COST - SHORTEST) + " tell me"
    assert search_for("", turns(("user", earlier), ("user", tight))).meaning == tight
