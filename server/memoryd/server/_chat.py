"""memoryd's chat model client: any OpenAI-compatible ``POST {url}/chat/completions`` (OpenAI,
vLLM, llama.cpp's llama-server, llama-cpp-python, Ollama at http://localhost:11434/v1, …),
asked for one JSON document that follows a schema.

Servers differ in how they take that request, so the client has an **output mode**
(``extraction_output``):

- ``json_schema``: ``response_format: {"type": "json_schema", "json_schema": {…, "strict":
  true}}`` — OpenAI, vLLM, recent llama-server and Ollama;
- ``json_object``: ``response_format: {"type": "json_object", "schema": …}`` and the schema in
  the system prompt — llama-cpp-python and older llama-server (which constrain decoding to
  the schema given this way), and any server with a plain JSON mode;
- ``prompt``: no ``response_format`` at all, the schema in the system prompt;
- ``auto`` (the default): ``json_schema`` first; when the server answers an error that names
  the structured-output request (llama-server's HTTP 500 "response_format type must be one of
  text or json_object", a 400 or 422 about ``json_schema``), the next mode, at once, and this
  client keeps the mode that worked.

Whatever the mode, the answer is read leniently: a ``<think>`` block is skipped, and JSON in
a Markdown fence or between prose is found (Ollama before 0.5 ignores ``response_format``).
The items themselves are then checked one by one by the caller.

``max_tokens`` bounds the answer (``extraction_max_tokens``); an endpoint that only takes
``max_completion_tokens`` (OpenAI's reasoning models answer HTTP 400 naming it) is asked
again with that instead. An answer cut at the bound is a parse error that says so.

The HTTP exchange is the one every OpenAI-compatible client of memoryd shares
(``memoryd.storage.JsonEndpoint``: its own threads, so a slow model never blocks the event
loop); how many requests a deployment sends at once is the worker's business
(``memoryd.storage.ModelSlots``). Errors say the status and a reason of memoryd's, never the
server's words (``_chat_errors``).
"""

from __future__ import annotations

import functools
import json
import logging
import re
from typing import Any

from memoryd.storage import HttpStatus, JsonEndpoint, Unreachable, http_endpoint

from ._chat_errors import ExtractionParseError, ExtractionUnavailable, status_error

_log = logging.getLogger("memoryd.server.extraction")

OUTPUT_MODES = ("auto", "json_schema", "json_object", "prompt")
_FALLBACK = {"json_schema": "json_object", "json_object": "prompt"}
# An error about the structured-output request itself: worth the next mode under "auto".
_FORMAT_STATUSES = (400, 404, 415, 422, 500, 501)
_FORMAT_WORDS = re.compile(r"response_format|json_schema|json schema|structured output|guided_json|grammar",
                           re.IGNORECASE)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def json_document(content: str) -> Any:
    """The JSON document in a model's message ``content``, read leniently (see the module's
    doc); ExtractionParseError if there is none."""
    text = _THINK.sub("", content).strip()
    candidates = [text, *(m.group(1).strip() for m in _FENCE.finditer(text))]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    raise ExtractionParseError("the model's content is not JSON")


def answer_document(raw: bytes, max_tokens: int = 0) -> Any:
    """The JSON document a chat completion answer carries as its message content;
    ExtractionParseError if there is none."""
    try:
        answer = json.loads(raw)
        choice = answer["choices"][0]
        message = choice["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise ExtractionParseError("the answer is not a chat completion") from None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        refusal = message.get("refusal") if isinstance(message, dict) else None
        raise ExtractionParseError("the model refused" if refusal else "the answer has no content")
    try:
        return json_document(content)
    except ExtractionParseError:
        if isinstance(choice, dict) and choice.get("finish_reason") == "length":
            bound = f" ({max_tokens})" if max_tokens else ""
            raise ExtractionParseError(f"the model's answer was cut off at max_tokens{bound}",
                                       f"the extraction model's answer was cut off at max_tokens{bound}; "
                                       "raise extraction_max_tokens") from None
        raise


class ChatClient:
    """Asks an OpenAI-compatible chat model for JSON documents."""

    def __init__(self, url: str, model: str, api_key: str = "", timeout: float = 60.0, *, output: str = "auto",
                 max_tokens: int = 2048, threads: int = 2) -> None:
        http_endpoint(url, "extraction_url", "extraction_api_key")
        if output not in OUTPUT_MODES:
            raise ValueError(f"extraction_output must be one of {', '.join(OUTPUT_MODES)}, got {output!r}")
        self._endpoint = JsonEndpoint(url.strip().rstrip("/") + "/chat/completions", api_key, timeout,
                                      threads=threads, name="chat")
        self._where = self._endpoint.where
        self.model = model.strip()
        self._api_key = api_key
        self._output = output
        self.mode = "json_schema" if output == "auto" else output  # the mode in use now
        self.max_tokens = max_tokens
        self._tokens_field = "max_tokens"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self._endpoint.url!r}, model={self.model!r}, mode={self.mode!r})"

    @property
    def endpoint(self) -> str:
        """The URL requests go to: what a deployment's concurrency limit is counted per."""
        return self._endpoint.url

    def body(self, system: str, user: str, schema_name: str, schema: dict[str, Any]) -> dict[str, Any]:
        """The request for one JSON document under ``schema``, in the mode in use now."""
        if self.mode != "json_schema":
            system += ("\n\nAnswer with one JSON object, and nothing else, that follows this JSON schema:\n"
                       + json.dumps(schema, ensure_ascii=False, separators=(",", ":")))
        body: dict[str, Any] = {
            "model": self.model,
            "temperature": 0,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        }
        if self.max_tokens:
            body[self._tokens_field] = self.max_tokens
        if self.mode == "json_schema":
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": schema_name, "strict": True, "schema": schema}}
        elif self.mode == "json_object":
            body["response_format"] = {"type": "json_object", "schema": schema}
        return body

    async def ask(self, system: str, user: str, schema_name: str, schema: dict[str, Any]) -> Any:
        """The JSON document the model answers ``user`` with, under ``schema``."""
        while True:
            body = self.body(system, user, schema_name, schema)
            try:
                raw = await self._endpoint.call(functools.partial(self._endpoint.post, body))
            except HttpStatus as answer:
                if not self._adapt(answer):
                    raise status_error(answer.status, answer.body, self._where, secrets=(self._api_key,)) from None
                continue
            except Unreachable as exc:
                raise self._unreachable(exc) from exc
            return answer_document(raw, self.max_tokens)

    def _adapt(self, answer: HttpStatus) -> bool:
        """Change the request to what this endpoint takes, if ``answer`` says how; True if
        it was changed (each change is made at most once, so this ends)."""
        text = answer.body.decode("utf-8", "replace")
        if (self._output == "auto" and self.mode in _FALLBACK and answer.status in _FORMAT_STATUSES
                and _FORMAT_WORDS.search(text)):
            self.mode = _FALLBACK[self.mode]
            _log.warning("the chat model at %s does not take this structured-output request (HTTP %d); "
                         "using output mode %s", self._where, answer.status, self.mode)
            return True
        if answer.status == 400 and "max_completion_tokens" in text and self._tokens_field == "max_tokens":
            self._tokens_field = "max_completion_tokens"
            _log.warning("the chat model at %s takes max_completion_tokens, not max_tokens", self._where)
            return True
        return False

    def _unreachable(self, exc: Unreachable) -> ExtractionUnavailable:
        if exc.timed_out:
            return ExtractionUnavailable(f"the extraction model at {self._where} timed out after "
                                         f"{self._endpoint.timeout:g}s", "the extraction model did not answer in time",
                                         timed_out=True)
        if exc.cause == "closed":
            return ExtractionUnavailable("the extraction client is closed")
        return ExtractionUnavailable(f"the extraction model at {self._where} cannot be reached ({exc.cause})")

    def close(self) -> None:
        self._endpoint.close()
