"""The turns an extracted item really comes from (``server._provenance``): a model's claimed
``source_turn_ids`` checked against what the turns say, the decisive turn first."""

from __future__ import annotations

import pytest

from memoryd.server.screen._provenance import UNSUPPORTED, source_turns

PASSPORT = [
    ("t1", "Alice", "I need to renew my passport soon."),
    ("t2", "Bob", "Sure, what's the number on it?"),
    ("t3", "Alice", "It's E1234 5678."),
]
BANK = [
    ("t1", "张伟", "你好，我想办一张银行卡。"),
    ("t2", "助手", "好的，请提供您的身份证号码和手机号。"),
    ("t3", "张伟", "身份证是11010519491231002X，手机１３８ １２３４ ５６７８。"),
]
SISTER = [
    ("t1", "Alice", "My sister Carol just moved."),
    ("t2", "Bob", "Oh, where to?"),
    ("t3", "Alice", "To Lyon, she loves it there."),
    ("t4", "Alice", "Her number is 06 12 34 56 78 if you need it."),
]
WEEKEND = [
    ("t1", "助手", "你周末一般做什么？"),
    ("t2", "张伟", "我最喜欢去爬山，尤其是秋天。"),
]


def test_a_number_said_in_another_turn_puts_that_turn_first():
    assert source_turns("Alice's passport number is E12345678", ["Alice"], ["t1"], PASSPORT) == ("t3", "t1")


def test_a_claim_that_holds_the_number_is_kept_and_a_claimed_turn_without_evidence_is_not():
    assert source_turns("Alice's passport number is E12345678", ["Alice"], ["t2", "t3"], PASSPORT) == ("t3", "t2")
    assert source_turns("Alice's passport number is E12345678", ["Alice"], ["t3", "t3"], PASSPORT) == ("t3",)


@pytest.mark.parametrize(("text", "claimed", "expected"), [
    ("张伟的身份证号码是11010519491231002X", ["t2"], ("t3", "t2")),
    ("张伟的手机号是13812345678", ["t1"], ("t3",)),  # t1 is only 张伟 speaking: no evidence
    ("张伟的手机号是13812345678", ["t2", "t3"], ("t3", "t2")),
], ids=["resident-id-claimed-from-the-question", "phone-claimed-from-another-turn", "phone-claim-reordered"])
def test_chinese_identity_numbers_are_traced_to_the_turn_that_says_them(text, claimed, expected):
    assert source_turns(text, ["张伟"], claimed, BANK) == expected


@pytest.mark.parametrize(("item", "wrong", "said"), [
    ("用户的电话是0123456789", "用户的电话是0123456788", "我的电话是０１２３４５６７８９"),
    ("用户的电话是０１２３４５６７８９", "用户的电话是０１２３４５６７８８", "我的电话是0123-456-789"),
    ("Alice's phone is ０６\u3000１２\u3000３４\u3000５６\u3000７８", "Alice's phone is ０６\u3000１２\u3000３４\u3000５６\u3000７９",
     "Call me on 0612345678."),
], ids=["full-width-in-the-turn", "full-width-in-the-item", "full-width-with-ideographic-spaces"])
def test_full_width_digits_are_the_same_number(item, wrong, said):
    turns = [("t1", "Bob", "What's your number?"), ("t2", "Alice", said)]
    assert source_turns(item, [], ["t1"], turns) == ("t2",)
    assert source_turns(wrong, [], ["t1"], turns) == ()


def test_a_paraphrase_keeps_its_claimed_turn():
    turns = [("t1", "Alice", "I moved to Lyon two years ago."), ("t2", "Bob", "Nice, how do you like it?"),
             ("t3", "Alice", "I love it.")]
    assert source_turns("Alice lives in Lyon", ["Alice", "Lyon"], ["t1"], turns) == ("t1",)
    # t3 holds nothing of the item but its speaker's name: not a source.
    assert source_turns("Alice lives in Lyon", ["Alice", "Lyon"], ["t3", "t1"], turns) == ("t1",)


def test_a_wrong_claim_gives_way_to_the_turn_holding_the_content_words():
    turns = [("t1", "Bob", "How was your weekend?"),
             ("t2", "Alice", "Great, I went hiking in the mountains with my sister."),
             ("t3", "Bob", "Sounds lovely.")]
    assert source_turns("Alice went hiking in the mountains with her sister", ["Alice"], ["t1"], turns) == ("t2",)


@pytest.mark.parametrize(("said", "expected"), [
    ("I love the mountains.", ()),
    ("I love hiking in the mountains.", ("t2",)),
], ids=["one-of-three-words", "two-of-three-words"])
def test_an_unclaimed_turn_needs_two_content_words_of_three(said, expected):
    turns = [("t1", "Bob", "How was your weekend?"), ("t2", "Alice", said)]
    assert source_turns("Alice went hiking in the mountains with her sister", ["Alice"], ["t9"], turns) == expected


def test_an_item_of_one_content_word_needs_that_word():
    turns = [("t1", "Bob", "Hello."), ("t2", "Alice", "Honestly, I am vegetarian.")]
    assert source_turns("Alice is vegetarian", [], ["t9"], turns) == ("t2",)
    assert source_turns("Alice is vegan", [], ["t9"], turns) == ()


@pytest.mark.parametrize(("text", "entities"), [
    ("Alice's passport number is E87654321", ["Alice"]),
    ("Alice's passport number is E12345678, issued in Paris", ["Alice"]),  # a name no one said
    ("Carol's passport number is E12345678", ["Carol"]),  # a name no one said, starting the text
    ("张伟的手机号是13912345678", ["张伟"]),
])
def test_an_invented_number_or_name_has_no_source(text, entities):
    assert source_turns(text, entities, ["t3"], PASSPORT + BANK[2:]) == ()


def test_a_short_number_is_not_found_inside_a_longer_one():
    turns = [("t1", "Alice", "I moved here in 2020 with my cats.")]
    assert source_turns("Alice has 2 cats", ["Alice"], ["t1"], turns) == ()
    assert source_turns("Alice has had cats since 2020", ["Alice"], ["t1"], turns) == ("t1",)


@pytest.mark.parametrize(("text", "said"), [
    ("Alice has 2 children", "I have two kids."),
    ("张伟有2个孩子", "我有两个孩子。"),
    ("Alice is 23", "I'm twenty-three."),
    ("Alice flies to Tokyo on 2025-05-01", "My flight to Tokyo is on May 1st, 2025."),
    ("Alice's card ends in 4242", "My card is 4111 1111 1111 4242."),
], ids=["english-word", "chinese-numeral", "compound-word", "date-in-words", "inside-a-grouped-number"])
def test_numbers_said_in_words_or_groups_are_found(text, said):
    turns = [("t0", "Bob", "Tell me about yourself."), ("t1", "Alice", said)]
    assert source_turns(text, [], ["t0"], turns) == ("t1",)


@pytest.mark.parametrize("text", ["Alice has 4 children", "张伟有4个孩子", "Alice is 24",
                                  "Alice flies to Tokyo on 2025-06-01", "Alice's card ends in 4243"])
def test_numbers_said_in_words_or_groups_must_still_be_the_same(text):
    turns = [("t0", "Bob", "Tell me about yourself."), ("t1", "Alice", "I have two kids."),
             ("t2", "Alice", "我有两个孩子。"), ("t3", "Alice", "I'm twenty-three."),
             ("t4", "Alice", "My flight to Tokyo is on May 1st, 2025."),
             ("t5", "Alice", "My card is 4111 1111 1111 4242.")]
    assert source_turns(text, [], ["t0"], turns) == ()


def test_a_claim_naming_no_turn_of_the_job_is_replaced_by_the_turn_holding_the_names():
    turns = [("t1", "Bob", "Where are you staying?"), ("t2", "Alice", "At the Hotel Bellevue in Geneva.")]
    assert source_turns("Alice is staying at the Hotel Bellevue in Geneva", ["Hotel Bellevue", "Geneva"],
                        ["/t1", ""], turns) == ("t2",)


def test_a_claim_naming_no_turn_of_the_job_is_replaced_by_the_turn_holding_the_content():
    turns = [("t1", "Bob", "Any plans?"), ("t2", "Alice", "I'm learning to play the cello this winter.")]
    assert source_turns("Alice is learning the cello", [], ["/t1", ""], turns) == ("t2",)


def test_an_item_that_only_names_the_speaker_comes_from_that_speaker():
    turns = [("t1", "Alice", "Hi, nice to meet you."), ("t2", "Bob", "Nice to meet you too."),
             ("t3", "Alice", "Likewise!")]
    assert source_turns("The user is Alice", ["Alice"], ["t3"], turns) == ("t3",)
    assert source_turns("The user is Alice", ["Alice"], ["t2"], turns) == ("t1",)
    assert source_turns("The user is Carol", ["Carol"], ["t2"], turns) == ()


def test_a_speaker_who_never_says_her_name_still_supports_an_item_naming_her():
    turns = [("t1", "Bob", "Where do you work?"), ("t2", "Alice", "At Airbus, in Toulouse.")]
    # The question stays as a second source: it shares "work" with the item.
    assert source_turns("Alice works at Airbus in Toulouse", ["Alice", "Airbus", "Toulouse"], ["t1"],
                        turns) == ("t2", "t1")


@pytest.mark.parametrize(("claimed", "expected"), [
    (["t9"], ("t2",)),
    (["t2"], ("t2",)),
    (["t1", "t2"], ("t2", "t1")),
], ids=["unknown-claim", "right-claim", "reordered-by-overlap"])
def test_a_chinese_paraphrase_is_matched_by_character_bigrams(claimed, expected):
    assert source_turns("用户喜欢在周末去爬山", [], claimed, WEEKEND) == expected


def test_supporting_turns_are_ordered_numbers_first_then_names_then_content():
    item = "Alice's sister Carol lives in Lyon, phone 0612345678"
    entities = ["Alice", "Carol", "Lyon"]
    assert source_turns(item, entities, ["t1", "t2", "t3", "t4"], SISTER) == ("t4", "t1", "t3")
    # Nothing claimed holds the required material: picked one missing token at a time, the
    # number first on a tie, then in dialogue order.
    assert source_turns(item, entities, ["t2"], SISTER) == ("t4", "t1", "t3")


def test_the_turn_covering_most_missing_tokens_is_picked_first():
    turns = [*SISTER, ("t5", "Bob", "So Carol is in Lyon now?")]
    assert source_turns("Alice's sister Carol lives in Lyon, phone 0612345678", ["Alice", "Carol", "Lyon"],
                        ["t2"], turns) == ("t5", "t4")


def test_a_name_that_starts_a_sentence_is_not_required_unless_it_is_an_entity():
    turns = [("t1", "Alice", "I flew to Lyon yesterday.")]
    assert source_turns("Yesterday Alice flew to Lyon", [], ["t1"], turns) == ("t1",)
    assert source_turns("Marseille was not on the way; Alice flew to Lyon", [], ["t1"], turns) == ("t1",)
    assert source_turns("Alice flew to Lyon from Marseille", [], ["t1"], turns) == ()


def test_nothing_to_go_on_is_unsupported():
    assert source_turns("Alice's passport number is E12345678", ["Alice"], ["t1"], []) == ()
    assert source_turns("Alice likes hiking", [], ["t1"], []) == ()
    assert UNSUPPORTED == "unsupported_source"


def test_an_entity_the_item_does_not_say_is_not_required():
    turns = [("t1", "Alice", "I moved to Lyon two years ago.")]
    assert source_turns("Alice lives in Lyon", ["Lyon, France"], ["t1"], turns) == ("t1",)
    assert source_turns("Alice lives in Lyon, France", ["Lyon, France"], ["t1"], turns) == ()


def test_the_subjects_name_needs_no_turn():
    turns = [("t1", "user", "I moved to Lyon two years ago.")]
    assert source_turns("Alice lives in Lyon", ["Alice", "Lyon"], ["t1"], turns) == ()
    assert source_turns("Alice lives in Lyon", ["Alice", "Lyon"], ["t1"], turns, known=["alice"]) == ("t1",)
