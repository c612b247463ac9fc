"""The contract's fixed limits (``memoryd.domain.CONTRACT``) are what the protos say — in their
buf.validate annotations and in their comments — and the configurable ones are printed there as
defaults, not as fixed rules.

A client developer reads the limits in the proto comments and the annotations (and the code
generated from them in every language); the server enforces the annotations, CONTRACT (which the
domain, the Milvus schema and normalisation use, and which cannot read protos) and ``Limits``.
These tests keep them in step.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from buf.validate import validate_pb2

from memoryd.domain import CONTRACT, Grammar
from memoryd.server import Config, Limits
from memoryd.v1 import memory_pb2, memory_service_pb2, token_admin_service_pb2, view_admin_service_pb2

PROTOS = Path(__file__).resolve().parents[2] / "protos" / "memoryd" / "v1"


def comment(file: str, message: str, field: str) -> str:
    """The comment above ``field`` in ``message``, as one line."""
    text = (PROTOS / file).read_text()
    body = re.search(rf"\nmessage {message} {{\n(.*?)\n}}", text, re.S)
    assert body, f"{file}: no message {message}"
    lines: list[str] = []
    for line in body.group(1).splitlines():
        stripped = line.strip()
        if stripped.startswith("//"):
            lines.append(stripped.removeprefix("//").strip())
        elif re.match(rf"(repeated |optional )?[\w.]+ {field} = \d+( \[|;)", stripped):
            return " ".join(lines)
        else:
            lines = []
    raise AssertionError(f"{file}: {message} has no field {field}")


def human(n: int) -> str:
    if n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n:,}"


def punctuation(grammar: Grammar) -> str:
    return grammar.characters.rsplit(" and ", 1)[1]


FIXED = [
    ("memory.proto", "MemoryDraft", "session_id", CONTRACT.session_id),
    ("memory.proto", "MemoryDraft", "source_turn_id", CONTRACT.source_turn_id),
    ("memory.proto", "MemoryDraft", "source_turn_ids", CONTRACT.source_turn_id),
    ("memory.proto", "Turn", "turn_id", CONTRACT.turn_id),
    ("token_admin_service.proto", "IssueTokenRequest", "agent", CONTRACT.agent),
    ("token_admin_service.proto", "IssueTokenRequest", "subject", CONTRACT.subject),
]


@pytest.mark.parametrize(("file", "message", "field", "grammar"), FIXED, ids=[f"{m}.{f}" for _, m, f, _ in FIXED])
def test_a_fixed_identifier_is_described_with_the_contracts_length_and_characters(file, message, field, grammar):
    words = comment(file, message, field)
    assert f"1 to {grammar.max_bytes} bytes" in words
    assert f"`{punctuation(grammar)}`" in words and "starting with a letter or digit" in words


MODULES = {"memory.proto": memory_pb2, "memory_service.proto": memory_service_pb2,
           "token_admin_service.proto": token_admin_service_pb2, "view_admin_service.proto": view_admin_service_pb2}


def rules(file: str, message: str, field: str) -> validate_pb2.FieldRules:
    """The buf.validate annotation of ``field`` (of its items, for a repeated field)."""
    descriptor = MODULES[file].DESCRIPTOR.message_types_by_name[message].fields_by_name[field]
    found = descriptor.GetOptions().Extensions[validate_pb2.field]
    return found.repeated.items if descriptor.is_repeated else found


# Every field that holds one of the contract's identifiers, and which grammar.
IDENTIFIERS = [*FIXED,
               ("memory.proto", "MemoryDraft", "key", CONTRACT.key),
               ("memory.proto", "MemoryFilter", "keys", CONTRACT.key),
               ("memory.proto", "MemoryFilter", "session_id", CONTRACT.session_id),
               ("memory.proto", "View", "agent", CONTRACT.agent),
               ("memory_service.proto", "RecallRequest", "keys", CONTRACT.key),
               ("memory_service.proto", "EraseRequest", "key", CONTRACT.key),
               ("memory_service.proto", "EraseRequest", "source_turn_id", CONTRACT.source_turn_id),
               ("view_admin_service.proto", "GetViewRequest", "agent", CONTRACT.agent),
               ("view_admin_service.proto", "DeleteViewRequest", "agent", CONTRACT.agent),
               *[("memory_service.proto", m.name, "subject", CONTRACT.subject)
                 for m in memory_service_pb2.DESCRIPTOR.message_types_by_name.values()
                 if m.name.endswith("Request") and "subject" in m.fields_by_name]]


@pytest.mark.parametrize(("file", "message", "field", "grammar"), IDENTIFIERS,
                         ids=[f"{m}.{f}" for _, m, f, _ in IDENTIFIERS])
def test_an_identifier_is_annotated_with_the_contracts_grammar_and_length(file, message, field, grammar):
    found = rules(file, message, field).string
    assert found.pattern == f"^{grammar.pattern.pattern}$"
    assert found.max_bytes == grammar.max_bytes


def test_fixed_sizes_are_annotated_as_the_contract_has_them():
    assert rules("memory_service.proto", "WriteRequest", "idempotency_key").string.max_bytes == \
        CONTRACT.idempotency_key_bytes
    assert rules("memory.proto", "Turn", "speaker").string.max_bytes == CONTRACT.speaker_bytes
    for message in ("MemoryDraft", "MemoryFilter"):
        tags = memory_pb2.DESCRIPTOR.message_types_by_name[message].fields_by_name["tags"]
        annotation = tags.GetOptions().Extensions[validate_pb2.field].repeated
        assert (annotation.max_items, annotation.items.string.max_bytes) == (CONTRACT.tags, CONTRACT.tag_bytes)


def test_fixed_byte_limits_are_the_contracts():
    assert "(at most 128 bytes)" in comment("memory_service.proto", "WriteRequest", "idempotency_key")
    assert CONTRACT.idempotency_key_bytes == 128
    assert f"at most {CONTRACT.speaker_bytes} bytes" in comment("memory.proto", "Turn", "speaker")


# Configurable, but never beyond the contract: the comment gives the contract's ceiling.
CEILINGS = [
    ("memory.proto", "MemoryDraft", "key", CONTRACT.key.max_bytes, "max_key_bytes"),
    ("memory_service.proto", "WriteRequest", "subject", CONTRACT.subject.max_bytes, "max_subject_bytes"),
    ("memory.proto", "MemoryDraft", "tags", CONTRACT.tags, "max_tags"),
    ("memory.proto", "MemoryDraft", "tags", CONTRACT.tag_bytes, "max_tag_bytes"),
]


@pytest.mark.parametrize(("file", "message", "field", "ceiling", "setting"), CEILINGS,
                         ids=[s for *_, s in CEILINGS])
def test_a_configurable_limit_within_the_contract_says_so_and_config_refuses_more(file, message, field, ceiling,
                                                                                    setting):
    words = comment(file, message, field)
    assert str(ceiling) in words and "never more" in words
    assert getattr(Limits(), setting) == ceiling
    with pytest.raises(ValueError, match=f"limits.{setting} must be between 1 and {ceiling}"):
        Config(limits=replace(Limits(), **{setting: ceiling + 1}))
    Config(limits=replace(Limits(), **{setting: ceiling - 1}))  # fewer is a server's choice


# Server settings: the comment prints today's default as a default.
DEFAULTS = [
    ("memory.proto", "MemoryDraft", "text", human(Limits().max_text_bytes)),
    ("memory.proto", "MemoryDraft", "data", human(Limits().max_data_bytes)),
    ("memory.proto", "Turn", "text", human(Limits().max_turns_text_bytes)),
    ("memory_service.proto", "WriteRequest", "items", f"1 to {Limits().max_items}"),
    ("memory_service.proto", "RecallRequest", "query", human(Limits().max_query_bytes)),
    ("memory_service.proto", "RecallRequest", "keys", f"{Limits().max_keys} keys"),
    ("memory_service.proto", "RecallRequest", "context", f"at most {Limits().max_context_turns} turns"),
    ("memory_service.proto", "RecallRequest", "context", f"{human(Limits().max_turns_text_bytes)} of text"),
    ("memory_service.proto", "RecallRequest", "top_k", f"({Limits().max_top_k} by default)"),
    ("memory_service.proto", "RecallRequest", "token_budget", f"{human(Limits().max_token_budget)} by default"),
    ("memory_service.proto", "ImportMemoriesRequest", "archive", f"{human(Limits().max_message_bytes)} by default"),
]


@pytest.mark.parametrize(("file", "message", "field", "value"), DEFAULTS, ids=[f"{m}.{f}" for _, m, f, _ in DEFAULTS])
def test_a_server_setting_is_printed_as_a_default(file, message, field, value):
    words = comment(file, message, field)
    assert value in words and "default" in words


def test_a_grammar_counts_bytes_and_refuses_other_characters():
    assert CONTRACT.subject.fits("user-42@acme.example:7")
    assert not CONTRACT.subject.fits("a" * 129) and CONTRACT.subject.fits("a" * 128)
    assert not CONTRACT.key.fits("-leading") and not CONTRACT.key.fits("with space")
    assert not CONTRACT.tenant.fits("tenant/x") and not CONTRACT.tenant.fits("")
    assert not CONTRACT.turn_id.fits("é")
    assert CONTRACT.agent.described() == "1-64 letters, digits and ._- (starting with a letter or digit)"
