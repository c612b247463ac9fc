"""Identity and financial numbers found by memoryd itself (``server._pii``), and what the
tenant policy's ``pii`` makes of an extracted item that holds one."""

from __future__ import annotations

import pytest

from memoryd.domain import Category, TenantPolicy
from memoryd.server._config import load
from memoryd.server._extraction_filters import ExtractedItem, filter_items
from memoryd.server._chunking import chunk_drafts
from memoryd.server._pii import find_pii, redact, screened
from memoryd.server.usecases._write import screen_chunks


def found(text: str) -> list[tuple[str, str]]:
    return [(f.kind, text[f.start:f.end]) for f in find_pii(text)]


@pytest.mark.parametrize(("text", "expected"), [
    ("身份证号 11010519491231002X 请保密", [("resident_id", "11010519491231002X")]),
    ("My passport number is E12345678, renew it in May", [("passport", "E12345678")]),
    ("护照号码：G12345678", [("passport", "G12345678")]),
    ("passport no. 123456789", [("passport", "123456789")]),
    ("Her US passport: X1234567", [("passport", "X1234567")]),
    ("card 4111 1111 1111 1111 exp 12/26", [("bank_card", "4111 1111 1111 1111")]),
    ("银行卡 6222-0212-3456-7890-128", [("bank_card", "6222-0212-3456-7890-128")]),
    ("IBAN FR76 3000 6000 0112 3456 7890 189", [("iban", "FR76 3000 6000 0112 3456 7890 189")]),
    ("SSN 123-45-6789", [("ssn", "123-45-6789")]),
    ("call 138 1234 5678 or +86 13812345678", [("phone", "138 1234 5678"), ("phone", "+86 13812345678")]),
    ("office +44 20 7946 0958", [("phone", "+44 20 7946 0958")]),
    ("write to ana.lima@example.com", [("email", "ana.lima@example.com")]),
])
def test_each_kind_is_found_in_english_and_chinese(text, expected):
    assert found(text) == expected


@pytest.mark.parametrize("text", [
    "身份证 110105194912310021",  # wrong check character
    "身份证 110105194913310028",  # no 13th month (nor a card: it fails Luhn)
    "order 4111 1111 1111 1112",  # fails Luhn
    "IBAN FR76 3000 6000 0112 3456 7890 188",  # fails mod 97
    "SSN 666-45-6789",  # an area never issued
    "met on 2023-05-08 at 10:30, paid 1299.00 for 3 tickets",
    "tracking 0000000000000000",  # one digit repeated is no card
    "E12345678901 is a model number",  # too long for a passport
    "flight 13812345678902",  # too long for a mobile number (nor a card: it fails Luhn)
])
def test_dates_prices_and_numbers_without_their_check_digit_are_not_taken_for_ids(text):
    assert found(text) == []


def test_redaction_says_what_was_there_and_keeps_the_rest():
    text = "Passport E12345678, card 4111111111111111."
    assert redact(text, find_pii(text)) == "Passport [passport number], card [bank card number]."


def _item(text: str, key: str = "") -> ExtractedItem:
    return ExtractedItem(Category.FACT, text, key=key)


def test_the_policy_drops_redacts_or_keeps_items_with_numbers_and_counts_the_drops():
    items = [_item("Alice's passport is E12345678", "passport"), _item("Lives in Lyon", "home_city"),
             _item("E12345678"), _item("Alice lives in Lyon", "passport e12345678")]
    allow = lambda category, key: True  # noqa: E731

    kept, dropped = filter_items(items, TenantPolicy(), allow)
    assert [i.text for i in kept] == ["Lives in Lyon"] and dropped == {"pii": 3}

    kept, dropped = filter_items(items, TenantPolicy(pii="redact"), allow)
    # Nothing left but the number, or a number in the key (a name to look it up by): dropped.
    assert [i.text for i in kept] == ["Alice's passport is [passport number]", "Lives in Lyon"]
    assert dropped == {"pii": 2}

    kept, dropped = filter_items(items, TenantPolicy(pii="keep"), allow)
    assert len(kept) == 4 and not dropped


def test_the_policy_value_is_checked_when_the_configuration_is_read(tmp_path):
    config = tmp_path / "memoryd.toml"
    config.write_text('[policy]\npii = "redact"\n[policy.tenants.t1]\npii = "keep"\n')
    loaded = load(config, env={})
    assert loaded.policy_for("t1").pii == "keep" and loaded.policy_for("t2").pii == "redact"
    config.write_text('[policy]\npii = "mask"\n')
    with pytest.raises(ValueError, match="pii must be drop, redact or keep"):
        load(config, env={})


def test_chunks_are_screened_as_extracted_items_are():
    from datetime import UTC, datetime

    from memoryd.domain import Turn

    turns = [Turn("t1", "user", "Card 4111 1111 1111 1111 is the one to charge.", datetime(2026, 1, 1, tzinfo=UTC)),
             Turn("t2", "assistant", "Noted, the blue card then.", datetime(2026, 1, 1, 0, 1, tzinfo=UTC))]
    drafts = chunk_drafts(turns)
    kept, dropped = screen_chunks(drafts, "redact")
    assert [d.text for d in kept] == ["user: Card [bank card number] is the one to charge.",
                                      "assistant: Noted, the blue card then."] and not dropped
    assert kept[0].source_turn_id == "t1" and kept[0].tags == drafts[0].tags
    kept, dropped = screen_chunks(drafts, "drop")
    assert [d.text for d in kept] == ["assistant: Noted, the blue card then."] and dropped == {"pii": 1}
    assert screen_chunks(drafts, "keep") == (drafts, {})
    # A chunk keeps its speaker: that they gave such a number stays, the number does not.
    assert screened("user: E12345678", "redact") == "user: [passport number]"
    assert screened("E12345678.", "redact") is None  # nothing else left
