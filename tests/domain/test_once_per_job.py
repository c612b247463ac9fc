"""One sentence stored once per extraction job, under its best key."""

from __future__ import annotations

from memoryd.domain import Category, Draft
from memoryd.server.ingest._once import once_each, said_form


def draft(text: str, key: str = "", category: Category = Category.FACT) -> Draft:
    return Draft(category=category, text=text, key=key)


def test_the_same_sentence_under_three_keys_is_one_memory_under_the_key_that_names_it():
    drafts = [draft("Alice lives in Lyon.", "timezone"), draft("alice lives in  lyon", "city"),
              draft("Alice lives in Lyon", "home_city", Category.PREFERENCE), draft("Alice plays the cello", "hobby")]
    kept, repeats = once_each(drafts)
    assert [(d.key, d.text) for d in kept] == [("city", "alice lives in  lyon"), ("hobby", "Alice plays the cello")]
    assert repeats == {"duplicate": 2}


def test_a_timezone_key_is_kept_only_for_a_text_that_names_a_zone():
    kept, _ = once_each([draft("Alice is in Europe/Paris", "timezone"), draft("alice is in europe/paris", "home")])
    assert [d.key for d in kept] == ["timezone"]


def test_a_keyed_item_is_kept_before_a_keyless_one_and_otherwise_the_first():
    kept, _ = once_each([draft("Alice adopted Mochi", category=Category.EVENT), draft("Alice adopted Mochi", "pet")])
    assert [d.key for d in kept] == ["pet"]
    kept, _ = once_each([draft("Alice lives in Lyon", "a"), draft("Alice lives in Lyon", "b")])
    assert [d.key for d in kept] == ["a"]


def test_sentences_that_differ_in_a_word_or_a_number_are_both_kept():
    drafts = [draft("Alice weighs 3.5 kg more", "w1"), draft("Alice weighs 35 kg more", "w2"),
              draft("Alice lives in Lyon", "a"), draft("Alice lived in Lyon", "b"), draft("小王住在北京", "c"),
              draft("小王住在上海", "d")]
    kept, repeats = once_each(drafts)
    assert kept == drafts and not repeats


def test_case_width_punctuation_articles_and_the_particle_de_are_set_aside():
    assert said_form("The user's home city is LYON!") == said_form("user’s  home city is lyon")
    assert said_form("ｕｓｅｒ lives in Lyon") == said_form("User lives in a Lyon")
    assert said_form("小王的家在北京。") == said_form("小王家在北京")
    assert said_form("3.5") != said_form("35")


def test_the_sentence_kept_answers_to_every_turn_that_said_it():
    # An erase by the turn of a repeat must still find the one memory kept (issue 38, item 4).
    drafts = [Draft(category=Category.FACT, text="Alice lives in Lyon", key="timezone", source_turn_ids=("t1",)),
              Draft(category=Category.FACT, text="alice lives in lyon.", key="home_city", source_turn_ids=("t4", "t1")),
              Draft(category=Category.FACT, text="Alice lives in Lyon", key="city", source_turn_ids=("t2",))]
    [kept], _ = once_each(drafts)
    assert kept.key == "home_city" and kept.source_turn_ids == ("t4", "t1", "t2")
