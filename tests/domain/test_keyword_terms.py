"""Keyword terms: the tokenizer (stems, stopwords, Chinese segmentation, NFKC) and the keyed term
hasher, alone (the keyword index on PostgreSQL: tests/storage/test_keywords.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from memoryd.storage.keywords._keywords import TermHasher, tokenize


@pytest.mark.parametrize(
    ("text", "present", "absent"),
    [
        ("he runs every morning", ["run", "everi", "morn"], ["runs", "he"]),
        ("我下个月要去上海出差", ["上海", "出差"], ["我"]),
        ("我喜欢Python编程", ["喜欢", "python", "编程"], ["我喜欢python编程"]),
        ("中华人民共和国", ["中华人民共和国", "人民", "共和国"], []),
        ("primary_language", ["primari", "languag"], ["primary_language"]),
        ("home.city billing:plan docs/guide follow-up", ["citi", "bill", "plan", "doc", "guid", "follow", "up"], []),
        ("Asked for a refund of order 1042 in 2023", ["ask", "refund", "order", "1042", "2023"], ["for", "a", "of", "in"]),
        ("Ｐｙｔｈｏｎ ３", ["python", "3"], []),
    ],
    ids=["stem-and-stopword", "chinese", "mixed-chinese-latin", "chinese-search-mode", "key-underscore",
         "key-separators", "stopwords-and-digits", "nfkc-full-width"],
)
def test_tokenize_yields_expected_terms(text: str, present: list[str], absent: list[str]) -> None:
    tokens = tokenize(text)
    assert set(present) <= set(tokens), tokens
    assert not set(absent) & set(tokens), tokens


@pytest.mark.parametrize(
    ("a", "b"),
    [("running", "runs"), ("Language", "languages"), ("PYTHON", "python")],
    ids=["stem", "plural-and-case", "case"],
)
def test_tokenize_maps_word_forms_to_one_term(a: str, b: str) -> None:
    assert tokenize(a) == tokenize(b) != []


@pytest.mark.parametrize("text", ["", "   ", "!!! ... ???", "the and of to is", "a b c"],
                         ids=["empty", "blank", "punctuation", "stopwords", "single-letters"])
def test_tokenize_of_text_without_words_is_empty(text: str) -> None:
    assert tokenize(text) == []


def test_tokenize_keeps_repeats_for_term_frequency() -> None:
    assert Counter(tokenize("tea, tea and more tea"))["tea"] == 3


def test_term_hashes_are_stable_for_one_secret_and_differ_for_another() -> None:
    secret = b"s" * 32
    first, again, other = TermHasher(secret), TermHasher(secret), TermHasher(b"t" * 32)
    assert first.term("python") == again.term("python")
    assert first.term("python") != other.term("python")
    assert first.term("python") != first.term("rust")
    assert -(2**63) <= first.term("上海") < 2**63


@pytest.mark.parametrize("secret", [b"", b"short", b"x" * 65], ids=["empty", "too-short", "too-long"])
def test_term_hasher_refuses_a_weak_or_oversized_secret(secret: bytes) -> None:
    with pytest.raises(ValueError):
        TermHasher(secret)
