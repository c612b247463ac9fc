"""Identity and financial numbers found by memoryd itself (``server._pii``), and what the
tenant policy's ``pii`` makes of an extracted item that holds one."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memoryd.domain import Category, Draft, TenantPolicy
from memoryd.server._config_load import load
from memoryd.server.screen._extraction_filters import (
    ExtractedItem,
    draft_without_pii,
    filter_items,
    pii_screened,
)
from memoryd.server.ingest._chunking import chunk_drafts
from memoryd.server.screen._pii import PiiScreen, find_pii, redact, screened
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


# --- The job's screen: the numbers its turns held, found again however the model moves them.

TURNS = ["我的护照号是 K47291853。", "Mail ana.lima@example.com or call +44 20 7946 0958.",
         "Card 4111 1111 1111 1111, 身份证 11010519491231002X."]


def screen_found(text: str) -> list[tuple[str, str]]:
    return [(f.kind, text[f.start:f.end]) for f in PiiScreen(TURNS).findings(text)]


@pytest.mark.parametrize(("text", "expected"), [
    ("entity:k47291853", [("passport", "k47291853")]),  # the tag the reviewer found (issue 38)
    ("K47291853", [("passport", "K47291853")]),  # no word "passport" beside it
    ("K4729 1853 and k-4729-1853", [("passport", "K4729 1853"), ("passport", "k-4729-1853")]),
    ("Ｋ４７２９１８５３", [("passport", "Ｋ４７２９１８５３")]),  # full-width
    ("K4729\u200b1853", [("passport", "K4729\u200b1853")]),  # a zero-width space between
    ("护照(K4729_1853)", [("passport", "K4729_1853")]),
    ("entity:44-20-7946-0958", [("phone", "44-20-7946-0958")]),  # an entity tag drops the +
    ("call 020 7946 0958", [("phone", "020 7946 0958")]),  # the national form
    ("entity:ana.lima@example.com", [("email", "ana.lima@example.com")]),
    ("4111-1111-1111-1111", [("bank_card", "4111-1111-1111-1111")]),
], ids=["entity-tag", "alone", "spaced-dashed", "full-width", "zero-width", "underscored", "phone-tag",
        "phone-national", "email-tag", "card-dashed"])
def test_a_number_the_turns_held_is_found_again_however_it_is_written(text, expected):
    assert screen_found(text) == expected
    assert find_pii(text) == [] or "@" in text or text.startswith("4111")  # find_pii alone misses most


@pytest.mark.parametrize("text", [
    "K472918530",  # a longer number
    "XK47291853",  # a longer code
    "47291853",  # part of it
    "order 2026-12-05 at 10:30, 1,299.00 EUR, ref 4729-1853",
    "Ana Lima wrote from example.com",  # her name and the domain, not her address
], ids=["longer", "prefixed", "part", "date-price-order", "name-and-domain"])
def test_only_the_numbers_the_turns_held_are_found_not_what_resembles_them(text):
    assert screen_found(text) == []


def test_a_screen_names_none_of_its_numbers():
    assert "4729" not in repr(PiiScreen(TURNS)) and "example" not in repr(PiiScreen(TURNS))


@pytest.mark.parametrize(("text", "expected"), [
    ("办公室电话 010-12345678", "010-12345678"),
    ("深圳 (0755) 1234567", "(0755) 1234567"),
    ("0755-1234567 转 8", "0755-1234567"),
    ("call (415) 555-0132 today", "(415) 555-0132"),
    ("call 415-555-0132", "415-555-0132"),
    ("call 415.555.0132", "415.555.0132"),
], ids=["cn-beijing", "cn-parens", "cn-4-digit-area", "us-parens", "us-dashes", "us-dots"])
def test_landlines_and_north_american_numbers_are_phone_numbers(text, expected):
    assert found(text) == [("phone", expected)]


@pytest.mark.parametrize("text", [
    "due 2026-12-05, moved from 2026.12.05 or 05/12/2026",
    "from 10:30 to 11:45, 10:30-11:45",
    "it cost $1,299.00, or 415.55 a month",
    "order 415-555-01329 and A-415-555-0132",  # too long; inside a code
    "version 10.415.555.0132",  # inside a dotted number
    "415-5550-132 and 415-555-132",  # not the 3-3-4 shape
    "415-555.0132",  # two separators
    "115-555-0132 and 415-155-0132",  # no area or exchange code starts with 0 or 1
    "order 0012-3456789 and 01012345678",  # no area code set apart
    "tracking 20261205 1234567",
], ids=["dates", "times", "prices", "order-numbers", "dotted", "shape", "mixed", "nanp", "cn-no-area", "runs"])
def test_dates_times_prices_and_order_numbers_are_not_phone_numbers(text):
    assert found(text) == []


def test_each_field_of_an_item_is_screened_entities_and_tags_left_out_never_redacted():
    screen = PiiScreen(TURNS)
    item = ExtractedItem(Category.EVENT, "Alice flew to Lyon with passport K4729 1853",
                         entities=("K47291853", "Lyon", "+44 20 7946 0958"), tags=("travel", "k47291853"))
    allow = lambda category, key: True  # noqa: E731
    # "drop": the text holds a number, so the item goes.
    assert filter_items([item], TenantPolicy(), allow, screen) == ([], {"pii": 1})
    clean_text = replace(item, text="Alice flew to Lyon")
    [kept], dropped = filter_items([clean_text], TenantPolicy(), allow, screen)
    assert (kept.text, kept.entities, kept.tags, dropped) == ("Alice flew to Lyon", ("Lyon",), ("travel",), {})
    assert pii_screened(clean_text, kept) == {"entity": 2, "tag": 1}
    # "redact": the text keeps its words, the names holding a number still go.
    [kept], _ = filter_items([item], TenantPolicy(pii="redact"), allow, screen)
    assert (kept.text, kept.entities, kept.tags) == ("Alice flew to Lyon with passport [passport number]",
                                                     ("Lyon",), ("travel",))
    assert pii_screened(item, kept) == {"text": 1, "entity": 2, "tag": 1}
    # A key holding a number drops the item, redact or not; "keep" keeps everything.
    assert filter_items([replace(clean_text, category=Category.FACT, key="passport_k47291853")],
                        TenantPolicy(pii="redact"), allow, screen) == ([], {"pii": 1})
    assert filter_items([item], TenantPolicy(pii="keep"), allow, screen) == ([item], {})


def test_the_last_check_of_a_draft_covers_its_tags_and_data_as_well():
    screen = PiiScreen(TURNS)
    draft = Draft(Category.FACT, "Alice's contacts", key="contacts", tags=("entity:k47291853", "entity:lyon"),
                  data={"mail": "ana.lima@example.com", "note": "call 020 7946 0958 after six",
                        "k4729-1853": "x", "list": ["K47291853", 3, None, "ok"], "nested": {"card": "4111111111111111"}})
    clean, counts = draft_without_pii(draft, "redact", screen)
    assert clean is not None and clean.tags == ("entity:lyon",)
    assert clean.data == {"note": "call [phone number] after six", "list": [3, None, "ok"], "nested": {}}
    assert counts == {"tag": 1, "data": 1}
    clean, counts = draft_without_pii(draft, "drop", screen)
    assert clean is not None and clean.data == {"list": [3, None, "ok"], "nested": {}}
    assert draft_without_pii(replace(draft, text="Alice: K47291853"), "drop", screen) == (None, {})
    assert draft_without_pii(draft, "keep", screen) == (draft, {})


def test_the_worker_screens_entities_before_they_become_tags_and_counts_what_it_took_out():
    from datetime import UTC, datetime

    from memoryd.domain import AuditTag, Turn, View
    from memoryd.server.ingest._extraction import ExtractionWorker
    from memoryd.server.ingest._items import said_screen
    from memoryd.storage import ClaimedJob

    at = datetime(2026, 1, 1, 9, tzinfo=UTC)
    job = ClaimedJob("t", "job", "alice", "agent", 1, (Turn("t1", "alice", "I'm Alice. 我的护照号是 K47291853。", at),
                                                        Turn("t2", "alice", "I flew to Lyon.", at)), AuditTag())
    item = ExtractedItem(Category.EVENT, "Alice flew to Lyon", entities=("K47291853", "Lyon"),
                         source_turn_ids=("t2",), tags=("k4729 1853", "travel"))
    worker = ExtractionWorker(None, None, None, None, None)  # type: ignore[arg-type]  # drafts needs none of them
    for mode in ("drop", "redact"):
        drafts, dropped, screened = worker.drafts(job, [item], View.full("agent"), TenantPolicy(pii=mode), UTC)
        assert [d.tags for d in drafts] == [("entity:lyon", "travel")] and not dropped
        assert screened == {"entity": 1, "tag": 1}
    drafts, _, screened = worker.drafts(job, [item], View.full("agent"), TenantPolicy(pii="keep"), UTC)
    assert "entity:k47291853" in drafts[0].tags and not screened
    # The job's error and log lines: its numbers redacted, whatever the policy.
    assert said_screen(job.turns).redacted("failed on k4729-1853") == "failed on [passport number]"
