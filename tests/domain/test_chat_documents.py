"""What the chat client makes of a model server's answers, without a server: where models put
their JSON, and the error excerpt an operator reads (reason kept; secrets, echoed turns and
numbers dropped). The client against fakes of real servers: tests/server/test_chat.py."""

from __future__ import annotations

import json

import pytest

from memoryd.server._chat import json_document
from memoryd.server._chat_errors import ExtractionParseError, error_excerpt


@pytest.mark.parametrize(("content", "expected"), [
    ('{"items": []}', {"items": []}),
    ('<think>The user moved {somewhere}.</think>\n{"items": []}', {"items": []}),
    ('Sure!\n```json\n{"items": [1]}\n```\nAnything else?', {"items": [1]}),
    ('```\n{"items": [2]}\n```', {"items": [2]}),
    ('Here you go: {"items": [3]} — done.', {"items": [3]}),
], ids=["plain", "think-block", "json-fence", "bare-fence", "between-prose"])
def test_json_is_found_where_models_put_it(content, expected):
    assert json_document(content) == expected


@pytest.mark.parametrize("content", ["Sure! Nothing to remember.", "{not json}", ""])
def test_content_without_json_is_a_parse_failure(content):
    with pytest.raises(ExtractionParseError):
        json_document(content)


def test_an_error_excerpt_keeps_the_reason_and_drops_secrets_echoes_and_numbers():
    transcript = "[t1] (2026-11-30 09:00 Mon) user: I moved to Lyon last year, my passport is E12345678."
    body = json.dumps({"error": {"message": (
        "Invalid request from key sk-abcdef1234567890 (api_key=hunter22): cannot process 'I moved to Lyon last "
        "year, my passport is E12345678.' — call 13812345678 or write to ops@example.com\x00"),
        "type": "invalid_request_error"}}).encode()
    excerpt = error_excerpt(body, secrets=("hunter22",), transcript=transcript)
    assert excerpt.startswith("Invalid request from key [redacted] (api_key=[redacted]): cannot process '…")
    for leaked in ("sk-abcdef", "hunter22", "Lyon", "E12345678", "13812345678", "ops@example.com", "\x00"):
        assert leaked not in excerpt
    assert "[phone number]" in excerpt or "[email address]" in excerpt


@pytest.mark.parametrize(("body", "expected"), [
    (b'{"detail": "Not Found"}', "Not Found"),
    (b'{"object": "error", "message": "bad schema", "code": 400}', "bad schema"),
    (b'{"error": "model not loaded"}', "model not loaded"),
    (b"<html>502 Bad Gateway</html>", "<html>502 Bad Gateway</html>"),
    (b"", ""),
], ids=["fastapi", "vllm", "plain-error", "not-json", "empty"])
def test_an_error_excerpt_reads_each_servers_error_shape(body, expected):
    assert error_excerpt(body) == expected


def test_an_error_excerpt_is_short():
    excerpt = error_excerpt(json.dumps({"error": {"message": "x" * 5000}}).encode())
    assert len(excerpt) == 240 and excerpt.endswith("…")


def test_echoed_chinese_turn_text_is_cut_out():
    transcript = "[t1] (2026-11-30 09:00 Mon) user: 我下周三要去北京出差，住在朝阳区"
    excerpt = error_excerpt(b'{"error": {"message": "cannot parse: \\u6211\\u4e0b\\u5468\\u4e09\\u8981\\u53bb'
                            b'\\u5317\\u4eac\\u51fa\\u5dee"}}', transcript=transcript)
    assert excerpt == "cannot parse: …"
