"""The chat client against fakes that take requests as real servers do (OpenAI, vLLM, llama.cpp's
server, llama-cpp-python, Ollama 0.4): output modes, what it learns about an endpoint (from its
answers to probes of memoryd's own, never from the words of an error), and the errors an
operator reads (the status and a reason of memoryd's, nothing the server wrote)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from memoryd.domain import Turn
from memoryd.server.ingest._chat_errors import ExtractionParseError, ExtractionRefused, ExtractionUnavailable
from memoryd.server.ingest._extraction_llm import ChatExtractor, transcript

from ..support_fake_openai import Cut, FakeOpenAI, Slow, echo_traces

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)  # a Monday
TURNS = [Turn("t1", "user", "I moved to Lyon last year, my passport is E12345678.", NOW),
         Turn("t2", "user", "Next Friday I fly to Berlin.", NOW)]
ITEM = {"category": "fact", "key": "home_city", "text": "Alice lives in Lyon", "importance": 0.8,
        "confidence": 0.9, "stability": "stable", "sensitive": "none", "entities": ["Lyon"],
        "source_turn_ids": ["t1"], "tags": []}


def extract(fake: FakeOpenAI, *, output: str = "auto", max_tokens: int = 2048, timeout: float = 5.0,
            times: int = 1, turns: list[Turn] = TURNS) -> tuple[list[Any], ChatExtractor]:
    """Run ``times`` extractions through one client (as a worker would); their items."""
    client = ChatExtractor(fake.base_url + "/v1", "m", "sk-secret-key", timeout, output=output, max_tokens=max_tokens)

    async def run() -> list[Any]:
        return [(await client.extract(turns, NOW, UTC))[0] for _ in range(times)]

    try:
        return asyncio.run(run()), client
    finally:
        client.close()


def formats(fake: FakeOpenAI, probes: bool = False) -> list[str]:
    """The response_format of each request of memoryd's work (or of its probes) the fake got."""
    sent = fake.probes if probes else fake.chat_requests
    return [(r.body.get("response_format") or {}).get("type", "none") for r in sent]


@pytest.mark.parametrize("flavour", ["openai", "vllm"])
def test_servers_with_structured_outputs_get_a_strict_json_schema(flavour):
    with FakeOpenAI(flavour=flavour) as fake:
        fake.script_chat({"items": [ITEM]})
        [items], client = extract(fake)
    assert [i.text for i in items] == ["Alice lives in Lyon"]
    assert formats(fake) == ["json_schema"] and client.mode == "json_schema"
    body = fake.chat_requests[0].body
    assert body["response_format"]["json_schema"]["strict"] is True and body["max_tokens"] == 2048
    assert "JSON schema" not in body["messages"][0]["content"]  # the server holds the schema


@pytest.mark.parametrize("flavour", ["llama-server", "llama-cpp-python"])
def test_a_server_that_refuses_json_schema_is_asked_with_json_object_and_the_schema_and_keeps_it(flavour):
    with FakeOpenAI(flavour=flavour) as fake:
        fake.script_chat({"items": [ITEM]}, {"items": [ITEM]})
        [first, second], client = extract(fake, times=2)
    assert [i.text for i in first] == [i.text for i in second] == ["Alice lives in Lyon"]
    # One refused request, once: the client keeps the mode that worked.
    assert formats(fake) == ["json_schema", "json_object", "json_object"] and client.mode == "json_object"
    # Learnt from probes of memoryd's own: json_schema refused, json_object taken, json_schema
    # refused again (not a passing error). They carry nothing of the job's turns.
    assert formats(fake, probes=True) == ["json_schema", "json_object", "json_schema"]
    assert not any("Lyon" in json.dumps(p.body) or p.body["max_tokens"] > 16 for p in fake.probes)
    body = fake.chat_requests[-1].body
    fields = body["response_format"]["schema"]["properties"]["items"]["items"]["properties"]
    assert fields["source_turn_ids"]["items"]["enum"] == ["t1", "t2"]
    assert "follows this JSON schema" in body["messages"][0]["content"]


def test_an_ollama_that_ignores_response_format_is_read_from_its_fenced_answer():
    with FakeOpenAI(flavour="ollama-0.4") as fake:
        fake.script_chat({"items": [ITEM]})
        [items], client = extract(fake)
    assert [i.text for i in items] == ["Alice lives in Lyon"] and client.mode == "json_schema"
    assert formats(fake) == ["json_schema"]


def test_an_endpoint_that_takes_only_max_completion_tokens_is_asked_again_with_it():
    with FakeOpenAI(flavour="openai-reasoning") as fake:
        fake.script_chat({"items": [ITEM]}, {"items": []})
        [first, second], _ = extract(fake, times=2)
    assert [i.text for i in first] == ["Alice lives in Lyon"] and second == []
    sent = [r.body for r in fake.chat_requests]
    assert "max_tokens" in sent[0] and "max_completion_tokens" not in sent[0]
    assert all(b["max_completion_tokens"] == 2048 and "max_tokens" not in b for b in sent[1:]) and len(sent) == 3
    assert [("max_tokens" in p.body, "max_completion_tokens" in p.body) for p in fake.probes] == [
        (True, False), (False, True), (True, False)]


@pytest.mark.parametrize(("output", "kind"), [("json_object", "json_object"), ("prompt", "none")])
def test_a_chosen_mode_puts_the_schema_in_the_prompt(output, kind):
    with FakeOpenAI(flavour="openai") as fake:  # json_object on OpenAI needs the word JSON: it is there
        fake.script_chat({"items": [ITEM]})
        [items], client = extract(fake, output=output)
    assert [i.text for i in items] == ["Alice lives in Lyon"] and client.mode == output
    assert formats(fake) == [kind]
    system = fake.chat_requests[0].body["messages"][0]["content"]
    schema = json.loads(system.split("follows this JSON schema:\n", 1)[1])
    assert schema["properties"]["items"]["items"]["properties"]["source_turn_ids"]["items"]["enum"] == ["t1", "t2"]


def test_a_chosen_json_schema_is_not_changed_and_the_status_is_told():
    with FakeOpenAI(flavour="llama-server") as fake:
        with pytest.raises(ExtractionUnavailable) as raised:
            extract(fake, output="json_schema")
    assert formats(fake) == ["json_schema"] and fake.probes == []  # nothing else to try: nothing probed
    assert raised.value.message == "the extraction model was unavailable: HTTP 500 (server error)"
    # The log has the error's own identifiers (type, code), never its message.
    assert "HTTP 500" in raised.value.detail and "type=server_error" in raised.value.detail
    assert "response_format type" not in raised.value.detail and not raised.value.timed_out


def test_a_max_tokens_beyond_the_context_is_refused_and_nothing_is_learnt():
    with FakeOpenAI(flavour="vllm") as fake:
        with pytest.raises(ExtractionRefused) as raised:
            extract(fake, max_tokens=8192)
    assert raised.value.message == "the extraction model refused the request: HTTP 400"
    assert "type=BadRequestError" in raised.value.detail and "maximum context" not in raised.value.detail
    assert len(fake.chat_requests) == 1  # a refusal is not retried
    # The endpoint took a probe of the same shape: the refusal was this request's own.
    assert formats(fake, probes=True) == ["json_schema"]


def test_no_max_tokens_is_sent_when_it_is_zero():
    with FakeOpenAI() as fake:
        extract(fake, max_tokens=0)
    assert "max_tokens" not in fake.chat_requests[0].body


def test_an_answer_cut_at_max_tokens_says_so():
    with FakeOpenAI() as fake:
        fake.script_chat(Cut('{"items": [{"category": "fact", "text": "Alice li'))
        with pytest.raises(ExtractionParseError) as raised:
            extract(fake, max_tokens=64)
    assert raised.value.message == ("the extraction model's answer was cut off at max_tokens (64); "
                                    "raise extraction_max_tokens")


def test_the_api_key_a_server_echoes_is_not_repeated():
    with FakeOpenAI() as fake:
        fake.script_chat("400")  # the fake's 400 repeats the Authorization header it received
        with pytest.raises(ExtractionRefused) as raised:
            extract(fake)
    assert "sk-secret-key" not in raised.value.message and "sk-secret-key" not in raised.value.detail
    assert raised.value.message == "the extraction model refused the request: HTTP 400"


def test_a_request_abandoned_on_a_timeout_is_marked_so():
    with FakeOpenAI() as fake:
        fake.script_chat(Slow(3.0, {"items": []}))
        with pytest.raises(ExtractionUnavailable) as raised:
            extract(fake, timeout=0.5)
    assert raised.value.timed_out and raised.value.message == "the extraction model did not answer in time"


def test_the_model_reads_each_relative_date_written_out_against_its_turns_time():
    with FakeOpenAI() as fake:
        extract(fake)
    transcript = fake.chat_requests[0].body["messages"][1]["content"]
    assert "[t2] (2026-11-30 09:00 Mon) user: Next Friday (2026-12-04) I fly to Berlin." in transcript
    assert "last year (2025)" in transcript


# Turns a server's error may echo: quotes (escaped as \" in the echo), letters beyond ASCII
# (escaped as \uXXXX), and words that name the structured-output request.
SAID = [Turn("t1", "user", 'My sister wrote "Quokka-Zürich-42 is our passphrase" on a postcard.', NOW),
        Turn("t2", "user", "Bartholomew says 我们下周三去杭州看外婆, ümlaut-okay.", NOW)]
SAID_FORMAT = [Turn("t1", "user", "My notes app says: response_format json_schema not supported, "
                                  "structured output grammar error.", NOW)]


def test_an_error_that_echoes_the_turns_repeats_none_of_them():
    with FakeOpenAI() as fake:
        fake.script_chat("echo")  # HTTP 400 repeating the messages as JSON, escapes and all
        with pytest.raises(ExtractionRefused) as raised:
            extract(fake, turns=SAID)
    echoed = json.dumps(fake.chat_requests[0].body["messages"])
    assert "Quokka" in echoed and "\\u00fc" in echoed  # what the server's error said
    for said in (raised.value.message, raised.value.detail):
        assert not [trace for trace in echo_traces(*(t.text for t in SAID), transcript(SAID, UTC)) if trace in said]
    assert raised.value.message == "the extraction model refused the request: HTTP 400"


def _run(client: ChatExtractor, turns: list[Turn]) -> list[Any] | Exception:
    try:
        return asyncio.run(client.extract(turns, NOW, UTC))[0]
    except Exception as exc:  # noqa: BLE001 - the test looks at which
        return exc


def test_turn_text_that_names_response_format_in_an_echoed_error_changes_no_mode():
    with FakeOpenAI() as fake:
        client = ChatExtractor(fake.base_url + "/v1", "m", "sk-secret-key", 5.0)
        try:
            fake.script_chat("echo", {"items": [ITEM]})
            first = _run(client, SAID_FORMAT)
            second = _run(client, TURNS)  # the next job, of anyone
        finally:
            client.close()
    assert isinstance(first, ExtractionRefused) and [i.text for i in second] == ["Alice lives in Lyon"]
    # The echoed words named response_format; the endpoint took memoryd's probe all the same.
    assert formats(fake) == ["json_schema", "json_schema"] and client.mode == "json_schema"
    assert formats(fake, probes=True) == ["json_schema"]


def test_one_request_refused_naming_response_format_does_not_change_the_mode_for_the_next():
    with FakeOpenAI() as fake:
        client = ChatExtractor(fake.base_url + "/v1", "m", "sk-secret-key", 5.0)
        try:
            # This request's schema is refused (param: response_format); the endpoint takes others.
            fake.script_chat("refuse_format", {"items": [ITEM]})
            first = _run(client, TURNS)
            second = _run(client, TURNS)
        finally:
            client.close()
    assert isinstance(first, ExtractionRefused)
    assert first.message == "the extraction model refused the request: HTTP 400 (the server does not take this " \
                            "response_format)"
    assert [i.text for i in second] == ["Alice lives in Lyon"]
    assert formats(fake) == ["json_schema", "json_schema"] and client.mode == "json_schema"


def test_a_server_error_that_passes_while_probing_does_not_change_the_mode():
    with FakeOpenAI() as fake:
        client = ChatExtractor(fake.base_url + "/v1", "m", "", 5.0)
        try:
            # Overloaded for a moment: the request and the first probe get HTTP 500, then the
            # server takes json_object — and json_schema again.
            fake.script_chat("500", {"items": [ITEM]})
            fake.script_probes("500")
            first = _run(client, TURNS)
            second = _run(client, TURNS)
        finally:
            client.close()
    assert isinstance(first, ExtractionUnavailable) and [i.text for i in second] == ["Alice lives in Lyon"]
    assert formats(fake, probes=True) == ["json_schema", "json_object", "json_schema"]
    assert formats(fake) == ["json_schema", "json_schema"] and client.mode == "json_schema"


def test_what_one_endpoint_taught_its_client_changes_no_other_endpoint():
    with FakeOpenAI(flavour="llama-server") as old, FakeOpenAI(flavour="openai") as new:
        clients = [ChatExtractor(old.base_url + "/v1", "m", "", 5.0), ChatExtractor(new.base_url + "/v1", "m", "", 5.0),
                   ChatExtractor(old.base_url + "/v1", "other-model", "", 5.0)]
        try:
            old.script_chat({"items": [ITEM]})
            new.script_chat({"items": [ITEM]})

            async def run() -> None:  # one process, one event loop, as a server has
                await clients[0].extract(TURNS, NOW, UTC)
                await clients[1].extract(TURNS, NOW, UTC)

            asyncio.run(run())
        finally:
            for client in clients:
                client.close()
    assert [c.mode for c in clients] == ["json_object", "json_schema", "json_schema"]
    assert formats(new) == ["json_schema"] and new.probes == []
