"""What the chat client makes of a model server's answers, without a server: where models put
their JSON, and what an error says (the status and a reason of memoryd's, from the error's
structured fields; nothing of its message, which may echo the turns). The client against fakes
of real servers: tests/server/test_chat.py."""

from __future__ import annotations

import json

import pytest

from memoryd.server.ingest._chat import json_document
from memoryd.server.ingest._chat_errors import REASONS, ExtractionParseError, error_fields, status_error
from memoryd.storage import error_reason as reason


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


@pytest.mark.parametrize(("status", "body", "message"), [
    (400, {"error": {"message": "This model's maximum context length is 4096 tokens: 'I moved to Lyon'",
                     "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}},
     "the extraction model refused the request: HTTP 400 (the request is longer than the model's context)"),
    (400, {"error": {"code": 400, "message": "the request exceeds the available context size: I moved to Lyon",
                     "type": "exceed_context_size_error"}},
     "the extraction model refused the request: HTTP 400 (the request is longer than the model's context)"),
    (400, {"error": {"message": "Unsupported parameter: 'max_tokens'. I moved to Lyon", "type":
                     "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter"}},
     "the extraction model refused the request: HTTP 400 (the server does not take max_tokens)"),
    (400, {"object": "error", "message": "I moved to Lyon: maximum context length", "type": "BadRequestError",
           "param": None, "code": 400},
     "the extraction model refused the request: HTTP 400"),
    (401, {"error": {"message": "Incorrect API key provided: sk-abcdef1234567890", "type": "invalid_request_error",
                     "code": "invalid_api_key"}},
     "the extraction model refused the request: HTTP 401 (authentication failed)"),
    (429, {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}},
     "the extraction model was unavailable: HTTP 429 (rate limited)"),
    (500, {"error": {"code": 500, "message": 'response_format type must be one of "text" or "json_object"',
                     "type": "server_error"}},
     "the extraction model was unavailable: HTTP 500 (server error)"),
    (422, {"detail": [{"loc": ["body", "response_format"], "msg": "I moved to Lyon"}]},
     "the extraction model refused the request: HTTP 422"),
], ids=["openai-context", "llama-server-context", "openai-max-tokens", "vllm", "bad-key", "rate-limit",
        "llama-server-format", "fastapi"])
def test_an_error_says_the_status_and_a_reason_of_memoryds_from_the_servers_fields_never_its_words(
        status, body, message):
    error = status_error(status, json.dumps(body).encode(), "model.example:8000", secrets=("sk-abcdef1234567890",))
    assert error.message == message
    assert reason(status, error_fields(json.dumps(body).encode())) in (*REASONS, "")
    for said in (error.message, error.detail):
        assert "Lyon" not in said and "sk-abcdef" not in said and "maximum context" not in said


def test_only_short_identifiers_of_an_error_reach_the_log():
    body = json.dumps({"error": {"type": "invalid_request_error", "param": "I moved to Lyon last year",
                                 "code": "sk-abcdef1234567890", "message": "I moved to Lyon"}}).encode()
    assert error_fields(body, secrets=("sk-abcdef1234567890",)) == {"type": "invalid_request_error"}
    assert error_fields(b"<html>502 Bad Gateway</html>") == {} and error_fields(b"") == {}
    assert error_fields(b'{"error": "model not loaded"}') == {}
    assert error_fields(json.dumps({"error": {"type": "x" * 49}}).encode()) == {}
