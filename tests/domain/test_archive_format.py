"""The export archive on its own: canonical bytes, sealing, every way an archive is refused,
and what an export of a listing holds (paged, size-limited, as the view allows)."""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import UTC, datetime, timedelta

import pytest

from memoryd.domain import (
    MEMORY_FIELDS,
    ArchiveInvalid,
    Category,
    DataKeyUnavailable,
    Listing,
    Memory,
    Page,
    PermissionDenied,
    ResourceExhausted,
    Scope,
    SourceKind,
    Stability,
    Status,
    View,
    ViewRule,
)
from memoryd.server.usecases._archive import (
    FORMAT,
    SEALED_FORMAT,
    drafts,
    encode,
    memory_entry,
    open_archive,
    plain_archive,
    seal,
)
from memoryd.server._config import Limits
from memoryd.server.usecases._transfer import ExportCommand, export_archive

WHEN = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
PASSPHRASE = "correct horse battery staple"


def _memory(**overrides: object) -> Memory:
    values: dict[str, object] = dict(
        id="0b4f5c1e-0000-4000-8000-000000000001", subject="alice", scope=Scope.SUBJECT, session_id="",
        category=Category.FACT, key="employer", text="Works at 青岛啤酒", data={"since": 2019.0, "team": ["a"]},
        importance=0.699999988079071, confidence=1.0, stability=Stability.STABLE, pinned=True, tags=("work", "job"),
        valid_from=datetime(2019, 1, 1, tzinfo=UTC), valid_until=None, agent="seeder",
        source_kind=SourceKind.INFERENCE, source_turn_ids=("turn-7",), version=3, status=Status.ACTIVE,
        created_at=WHEN, updated_at=WHEN,
    )
    values.update(overrides)
    return Memory(**values)  # type: ignore[arg-type]


def _plain(*entries: dict[str, object]) -> bytes:
    return plain_archive("alice", list(entries), WHEN)


def _violations(data: bytes, passphrase: str = "") -> dict[str, str]:
    with pytest.raises(ArchiveInvalid) as caught:
        drafts(open_archive(data, passphrase), Limits())
    assert caught.value.reason == "ARCHIVE_INVALID"
    return {v.field: v.description for v in caught.value.violations}


def test_a_plain_archive_round_trips_into_the_drafts_a_write_would_make():
    data = _plain(memory_entry(_memory(), MEMORY_FIELDS))
    [draft] = drafts(open_archive(data), Limits())
    assert (draft.category, draft.key, draft.text, draft.data) == (
        Category.FACT, "employer", "Works at 青岛啤酒", {"since": 2019.0, "team": ["a"]})
    assert draft.importance == pytest.approx(0.7) and draft.pinned and draft.tags == ("job", "work")
    assert draft.valid_from == datetime(2019, 1, 1, tzinfo=UTC) and draft.valid_until is None
    assert (draft.source_kind, draft.source_turn_id) == (SourceKind.INFERENCE, "turn-7")


def test_every_source_turn_of_a_memory_round_trips_and_an_archive_with_one_turn_is_read_as_before():
    several = memory_entry(_memory(source_turn_ids=("turn-7", "turn-2", "D1:9")), MEMORY_FIELDS)
    assert several["provenance"]["source_turn_ids"] == ["turn-7", "turn-2", "D1:9"]
    [draft] = drafts(open_archive(_plain(several)), Limits())
    assert (draft.source_turn_id, draft.source_turn_ids) == ("turn-7", ("turn-7", "turn-2", "D1:9"))
    # One turn is written as the version before wrote it (which refuses fields it does not
    # know), and such an archive is read as one turn.
    single = memory_entry(_memory(), MEMORY_FIELDS)
    assert single["provenance"] == {"agent": "seeder", "source_kind": "inference", "source_turn_id": "turn-7"}
    [draft] = drafts(open_archive(_plain(single)), Limits())
    assert draft.source_turn_ids == ("turn-7",)
    bad = {**single, "provenance": {**single["provenance"], "source_turn_ids": ["turn-8", "t 9"]}}
    assert list(_violations(_plain(bad))) == ["archive.memories[0].source_turn_ids[1]"]


def test_archive_bytes_are_canonical_json():
    entry = memory_entry(_memory(), MEMORY_FIELDS)
    data = _plain(entry)
    assert data == _plain(dict(reversed(list(entry.items()))))
    document = json.loads(data)
    assert data == json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
    assert "青岛啤酒".encode() in data  # UTF-8, not \\u escapes
    assert document["format"] == FORMAT and document["version"] == 1 and document["exported_at"] == "2025-03-01T12:00:00Z"
    assert document["memories"][0]["importance"] == 0.7


def test_hidden_fields_are_left_out_of_the_archive_and_restored_with_defaults():
    entry = memory_entry(_memory(scope=Scope.SESSION, session_id="s1"), frozenset({"category", "key", "text", "session_id"}))
    assert entry == {"category": "fact", "key": "employer", "text": "Works at 青岛啤酒"}  # session only with scope
    [draft] = drafts(open_archive(_plain(entry)), Limits())
    assert (draft.scope, draft.importance, draft.pinned, draft.tags, draft.data) == (Scope.SUBJECT, 0.5, False, (), None)


def test_a_sealed_archive_round_trips_and_is_deterministic_given_salt_and_nonce():
    plain = _plain(memory_entry(_memory(), MEMORY_FIELDS))
    sealed = seal(plain, PASSPHRASE, salt=b"s" * 16, nonce=b"n" * 12)
    assert sealed == seal(plain, PASSPHRASE, salt=b"s" * 16, nonce=b"n" * 12)
    envelope = json.loads(sealed)
    assert envelope["format"] == SEALED_FORMAT and envelope["kdf"] == "scrypt" and envelope["n"] == 2**15
    assert "青岛".encode() not in sealed and b"employer" not in sealed
    assert open_archive(sealed, PASSPHRASE) == json.loads(plain)
    assert seal(plain, PASSPHRASE) != seal(plain, PASSPHRASE)  # fresh salt and nonce each time


def test_the_wrong_passphrase_or_none_does_not_open_a_sealed_archive():
    sealed = seal(_plain(), PASSPHRASE)
    assert "wrong" in _violations(sealed, "not the passphrase")["passphrase"]
    assert _violations(sealed, "")["passphrase"] == "is required to open a sealed archive"


@pytest.mark.parametrize("where", ["ciphertext", "nonce", "salt", "n", "version", "format"])
def test_a_tampered_sealed_archive_is_refused(where):
    envelope = json.loads(seal(_plain(memory_entry(_memory(), MEMORY_FIELDS)), PASSPHRASE))
    if where in ("ciphertext", "nonce", "salt"):
        raw = bytearray(base64.b64decode(envelope[where]))
        raw[0] ^= 1
        envelope[where] = base64.b64encode(bytes(raw)).decode()
    else:
        envelope[where] = {"n": 2**20, "version": 2, "format": "memoryd-export-sealed-v0"}[where]
    violations = _violations(encode(envelope), PASSPHRASE)
    assert violations  # and nothing opened


@pytest.mark.parametrize(("data", "field", "words"), [
    (b"\xff\xfe", "archive", "UTF-8"),
    (b"{not json", "archive", "JSON"),
    (b"[1, 2]", "archive", "object"),
    (b'{"format": "other-tool", "version": 1, "memories": []}', "archive.format", "memoryd-export"),
    (b'{"format": "memoryd-export", "version": 2, "memories": []}', "archive.version", "version 1"),
    (b'{"format": "memoryd-export", "version": "1", "memories": []}', "archive.version", "version 1"),
    (b'{"format": "memoryd-export", "version": 1, "memories": {}}', "archive.memories", "list"),
    (b"[" * 100_000 + b"]" * 100_000, "archive", "JSON"),
], ids=["not-utf8", "not-json", "not-object", "unknown-format", "unknown-version", "version-as-string",
        "memories-not-list", "deeply-nested"])
def test_a_malformed_archive_is_refused(data, field, words):
    violations = _violations(data)
    assert words in violations[field]


def test_every_invalid_memory_field_is_named_with_its_path():
    good = memory_entry(_memory(), MEMORY_FIELDS)
    data = _plain(
        good,
        {**good, "key": "has space"},
        {**good, "category": "gossip", "colour": "red"},
        {**good, "text": 42, "tags": "work", "importance": 2.0},
        {"category": "event", "key": "events-have-no-key", "text": "x"},
        {**good, "valid_from": "yesterday", "provenance": {"source_kind": "rumour"}},
        "not an object",
    )
    violations = _violations(data)
    assert set(violations) == {
        "archive.memories[1].key", "archive.memories[2].category", "archive.memories[2].colour",
        "archive.memories[3].text", "archive.memories[3].tags", "archive.memories[4].key",
        "archive.memories[5].valid_from", "archive.memories[5].provenance.source_kind", "archive.memories[6]",
    }


def test_a_short_passphrase_cannot_seal():
    with pytest.raises(ValueError, match="8 to 1024 bytes"):
        seal(_plain(), "short")


def _pages(memories: list[Memory], size: int = 2):
    """A listing of ``memories`` served page by page, newest first, as the store serves it."""
    ordered = sorted(memories, key=lambda m: (m.updated_at, m.id), reverse=True)

    async def pages(page: Page) -> Listing:
        start = 0
        if page.after_updated_at is not None:
            start = next(i for i, m in enumerate(ordered) if m.id == page.after_id) + 1
        chunk = ordered[start:start + size]
        return Listing(chunk, has_more=start + size < len(ordered))

    return pages


def _export(memories: list[Memory], view: View | None = None, max_bytes: int = 1 << 20) -> tuple[bytes, list[str]]:
    cmd = ExportCommand("alice", "", max_bytes)
    return asyncio.run(export_archive(view or View.full("a"), cmd, _pages(memories)))


def _many(n: int, text: str = "x") -> list[Memory]:
    return [_memory(id=f"0b4f5c1e-0000-4000-8000-{i:012d}", key=f"k{i}", text=f"{text} {i}",
                    created_at=WHEN + timedelta(minutes=i), updated_at=WHEN + timedelta(minutes=n - i))
            for i in range(n)]


def test_an_export_pages_through_everything_oldest_first():
    memories = _many(5)
    data, ids = _export(memories)
    assert ids == [m.id for m in memories]
    assert [m["key"] for m in json.loads(data)["memories"]] == ["k0", "k1", "k2", "k3", "k4"]


def test_an_export_that_would_not_fit_one_message_is_refused():
    with pytest.raises(ResourceExhausted, match="would exceed 2000 bytes"):
        _export(_many(5, "y" * 500), max_bytes=2000)


def test_an_export_with_undecryptable_memories_is_refused_rather_than_incomplete():
    with pytest.raises(DataKeyUnavailable):
        _export([*_many(2), _memory(text="", data=None, content_unavailable=True)])


@pytest.mark.parametrize("fields", [{"category", "key"}, {"text", "key"}, {"category", "text"}],
                         ids=["no-text", "no-category", "no-key"])
def test_a_view_hiding_what_a_restore_needs_cannot_export(fields):
    view = View("a", (ViewRule(Category.FACT),), (), False, frozenset(fields))
    with pytest.raises(PermissionDenied, match="exporting needs a view that shows"):
        _export(_many(1), view)


def test_a_view_of_keyless_categories_only_needs_no_key():
    view = View("a", (ViewRule(Category.EVENT),), (), False, frozenset({"category", "text"}))
    data, _ = _export([_memory(category=Category.EVENT, key="")], view)
    assert json.loads(data)["memories"] == [{"category": "event", "text": "Works at 青岛啤酒"}]


# Values no field of an archive may hold, spelled as JSON spells them (issue 37: a number of 401
# digits in importance, confidence or data was INTERNAL). None of them is a valid value of any field.
HUGE = "1" * 401
TROUBLE = {
    "401-digits": HUGE, "minus-401-digits": "-" + HUGE, "5000-digits": "1" * 5000, "1e400": "1e400", "nan": "NaN",
    "minus-infinity": "-Infinity", "lone-surrogate": '"a\\ud800b"', "deep-list": "[" * 900 + "]" * 900,
    "huge-in-object": f'{{"n":{HUGE}}}', "huge-in-list": f"[1,{HUGE}]",
}
GOOD = memory_entry(_memory(), MEMORY_FIELDS)
ENTRY_FIELDS = [*sorted(GOOD), "provenance.agent", "provenance.source_kind", "provenance.source_turn_id",
                "provenance.source_turn_ids"]


def _spelled_entry(field: str, value: str) -> str:
    """GOOD as JSON text, with ``field`` (``provenance.agent``: one of provenance's) spelled ``value``."""
    entry = {**GOOD, "provenance": dict(GOOD["provenance"])}
    owner, name = (entry["provenance"], field.split(".")[1]) if "." in field else (entry, field)
    owner[name] = "@@VALUE@@"
    return encode(entry).decode().replace('"@@VALUE@@"', value)


def _named(violations: dict[str, str], field: str) -> bool:
    return any(f == field or f.startswith((f"{field}.", f"{field}[")) for f in violations)


@pytest.mark.parametrize("value", TROUBLE.values(), ids=TROUBLE.keys())
def test_any_field_of_an_archived_memory_holding_a_wrong_value_is_named(value):
    entries = ",".join(_spelled_entry(field, value) for field in ENTRY_FIELDS)
    data = f'{{"format":"memoryd-export","version":1,"memories":[{entries}]}}'.encode()
    violations = _violations(data)
    assert [f for i, f in enumerate(ENTRY_FIELDS) if not _named(violations, f"archive.memories[{i}].{f}")] == []
    for field, description in violations.items():  # a reply can carry them: UTF-8, no lone surrogates
        field.encode(), description.encode()


@pytest.mark.parametrize("value", TROUBLE.values(), ids=TROUBLE.keys())
@pytest.mark.parametrize("field", ["format", "version", "exported_at", "subject", "memories"])
def test_any_field_of_an_archive_holding_a_wrong_value_is_named(field, value):
    document = {"format": FORMAT, "version": 1, "exported_at": "2025-03-01T12:00:00Z", "subject": "alice",
                "memories": [GOOD], field: "@@VALUE@@"}
    violations = _violations(encode(document).replace(b'"@@VALUE@@"', value.encode()))
    assert _named(violations, f"archive.{field}"), violations


SEALED = seal(_plain(GOOD), PASSPHRASE, salt=b"s" * 16, nonce=b"n" * 12)


@pytest.mark.parametrize("value", TROUBLE.values(), ids=TROUBLE.keys())
@pytest.mark.parametrize("field", ["format", "version", "kdf", "n", "r", "p", "salt", "nonce", "ciphertext"])
def test_any_field_of_a_sealed_archive_holding_a_wrong_value_is_named(field, value):
    envelope = {**json.loads(SEALED), field: "@@VALUE@@"}
    violations = _violations(encode(envelope).replace(b'"@@VALUE@@"', value.encode()), PASSPHRASE)
    assert _named(violations, f"archive.{field}"), violations


@pytest.mark.parametrize("value", [HUGE, TROUBLE["lone-surrogate"]], ids=["401-digits", "lone-surrogate"])
def test_a_wrong_value_inside_a_sealed_archive_is_named(value):
    data = f'{{"format":"memoryd-export","version":1,"memories":[{_spelled_entry("importance", value)}]}}'
    assert _named(_violations(seal(data.encode(), PASSPHRASE), PASSPHRASE), "archive.memories[0].importance")


@pytest.mark.parametrize(("data", "field", "words"), [
    (b'{"format":"memoryd-export","version":1,"version":2,"memories":[]}', "archive", "'version' twice"),
    (b'{"format":"memoryd-export","version":1,"memories":[{"category":"fact","text":"a","text":"b"}]}', "archive",
     "'text' twice"),
    (b'\xef\xbb\xbf{"format":"memoryd-export","version":1,"memories":[]}', "archive", "byte order mark"),
    (b'{"format":"memoryd-export","version":1,"memories":[],"count":0}', "archive.count", "not a field"),
    (b'{"format":"memoryd-export","version":1,"memories":[],"exported_at":"10000-01-01T00:00:00Z"}',
     "archive.exported_at", "ISO 8601"),
    (b'{"format":"memoryd-export","version":1,"memories":[{"category":"fact","text":"a","\\udc00":1}]}',
     "archive.memories[0]", "surrogate"),
], ids=["repeated-name", "repeated-name-in-memory", "bom", "unknown-field", "year-10000", "surrogate-in-name"])
def test_an_archive_that_json_would_read_ambiguously_or_not_at_all_is_refused(data, field, words):
    assert words in _violations(data)[field]


@pytest.mark.parametrize(("field", "value"), [
    ("valid_from", '"0000-01-01T00:00:00Z"'), ("valid_until", '"10000-01-01T00:00:00Z"'),
    ("valid_from", '"9999-12-31T23:59:59-05:00"'), ("created_at", "253402300800"), ("updated_at", '"2025-03-01"'),
    ("version", str(2**63)), ("version", "0"), ("version", "1.5"),
], ids=["year-0", "year-10000", "past-9999-in-utc", "epoch-number", "no-time", "version-past-int64",
        "version-0", "version-fraction"])
def test_times_and_versions_out_of_range_are_named(field, value):
    data = f'{{"format":"memoryd-export","version":1,"memories":[{_spelled_entry(field, value)}]}}'.encode()
    assert set(_violations(data)) == {f"archive.memories[0].{field}"}


def test_numbers_a_double_holds_are_read_as_a_write_would_read_them():
    entry = _spelled_entry("data", '{"big":18446744073709551616,"small":4.9e-324,"int":7}')
    data = f'{{"format":"memoryd-export","version":1,"memories":[{entry}]}}'.encode()
    [draft] = drafts(open_archive(data), Limits())
    assert draft.data == {"big": 2.0**64, "small": 5e-324, "int": 7.0}
