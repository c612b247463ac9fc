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
- ``auto`` (the default): ``json_schema`` first, then the next mode when the endpoint shows
  that it does not take the one in use (below).

``max_tokens`` bounds the answer (``extraction_max_tokens``); an endpoint that only takes
``max_completion_tokens`` (OpenAI's reasoning models) is asked with that instead. An answer
cut at the bound is a parse error that says so — unless the caller names a list to salvage:
then the list's complete elements before the cut are its answer (``CutOff``).

**How the client learns what an endpoint takes.** Never from the words of an error: a
server's error message may repeat the request, and so the user's turns — a turn that says
"response_format json_schema not supported" must not change how every later request, of any
tenant, is sent. Only from how the endpoint answers requests of memoryd's own. When a request
is answered with a status that may mean "not this format" (400, 404, 415, 422, 500, 501) and
there is another way to ask (another mode under ``auto``; ``max_completion_tokens`` after a
400), the client sends **probes**: the same request shape (mode, token bound, the caller's
schema) with content of memoryd's own (``Probe``: a fixed transcript, a schema naming no turn
of the job), bound to 16 tokens (if a bound is sent at all):

1. the shape that failed. Taken: the endpoint takes that shape, the failure was this
   request's own (its length, its content) — it is reported, nothing changes;
2. refused: each other shape in turn, the token bound first, then the next modes. The first
   one taken is probed against the failed shape once more — refused again, the endpoint
   really does not take it: the client uses the new shape from then on, for every request,
   and this request is sent again in it. Taken this time, the first refusal was passing
   (an overloaded server answers 500 too), and nothing changes;
3. any other answer to a probe (429, 503, a timeout) or no shape taken: nothing is learnt
   and the request's own error is reported.

So a shape changes only forward (``json_schema`` → ``json_object`` → ``prompt``;
``max_tokens`` → ``max_completion_tokens``), only on the endpoint's answers to requests that
hold nothing of any tenant, and never to one the endpoint refused. What a client learns is
about its endpoint, the URL and model it was made for: each client keeps its own, and a
deployment has one extraction endpoint, shared by all tenants.

Whatever the mode, the answer is read leniently: a ``<think>`` block is skipped, and JSON in
a Markdown fence or between prose is found (Ollama before 0.5 ignores ``response_format``).
The items themselves are then checked one by one by the caller.

The HTTP exchange is the one every OpenAI-compatible client of memoryd shares
(``memoryd.storage.JsonEndpoint``: its own threads, so a slow model never blocks the event
loop); how many requests a deployment sends at once is the worker's business
(``memoryd.storage.ModelSlots``). Errors say the status and a reason of memoryd's, never the
server's words (``_chat_errors``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import threading
from collections.abc import Callable
import logging
import re
from dataclasses import dataclass, replace
from typing import Any

from memoryd.storage import HttpStatus, JsonEndpoint, Unreachable, http_endpoint

from .._config import OUTPUT_MODES
from ._chat_errors import ExtractionParseError, ExtractionUnavailable, status_error

_log = logging.getLogger("memoryd.server.extraction")

_MODES = ("json_schema", "json_object", "prompt")  # the order "auto" moves in
_TOKEN_FIELDS = ("max_tokens", "max_completion_tokens")
# A status that may mean "not this format": worth probing for another shape.
_FORMAT_STATUSES = (400, 404, 415, 422, 500, 501)
PROBE_SYSTEM = ("This request only checks that the server takes its format. Answer with the smallest JSON "
                "document the schema allows.")
PROBE_TOKENS = 16
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


@dataclass(frozen=True)
class CutOff:
    """An answer cut off inside its list (``answer_document``'s ``salvage``): ``document`` holds
    the list's complete elements only, the one the cut went through left out."""

    document: dict[str, Any]


def _open_at_end(text: str) -> bool:
    """Whether ``text`` ends inside a JSON string, object or array: an answer cut short, not
    one that is wrong where it ends."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return in_string or depth > 0


def complete_elements(content: str, name: str) -> tuple[list[Any], bool] | None:
    """The complete elements of the list ``name`` in a JSON answer cut off part-way, and
    whether the list itself was closed; None if no such list begins in ``content``. Each
    element is decoded whole or not at all: one the cut went through (a string cut in two,
    an object missing its end) is never among them."""
    text = _THINK.sub("", content)
    start = text.find("{")
    found = re.compile(r'"%s"\s*:\s*\[' % re.escape(name)).search(text, max(start, 0)) if start >= 0 else None
    if found is None:
        return None
    decoder = json.JSONDecoder()
    elements: list[Any] = []
    at = found.end()
    while True:
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        if at >= len(text):
            return elements, False
        if text[at] == "]":
            return elements, True
        try:
            element, at = decoder.raw_decode(text, at)
        except ValueError:
            return elements, False  # the element the cut went through
        elements.append(element)


def answer_document(raw: bytes, max_tokens: int = 0, *, salvage: str = "") -> Any:
    """The JSON document a chat completion answer carries as its message content;
    ExtractionParseError if there is none. ``salvage``: the name of the document's list whose
    complete elements are kept when the answer was cut off (``finish_reason: length``, or JSON
    that ends open) — a ``CutOff`` if the cut went through the list, so one looping answer does
    not lose the items before the loop; an answer with no complete element fails as before."""
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
        cut = isinstance(choice, dict) and choice.get("finish_reason") == "length"
        if salvage and (cut or _open_at_end(_THINK.sub("", content))):
            kept = complete_elements(content, salvage)
            if kept is not None and kept[0]:
                elements, closed = kept
                return {salvage: elements} if closed else CutOff({salvage: elements})
        if cut:
            bound = f" ({max_tokens})" if max_tokens else ""
            raise ExtractionParseError(f"the model's answer was cut off at max_tokens{bound}",
                                       f"the extraction model's answer was cut off at max_tokens{bound}; "
                                       "raise extraction_max_tokens") from None
        raise


def held(fn: Callable[[], bytes]) -> asyncio.Future[bytes]:
    """``fn`` (a POST) on a daemon thread of its own, as a future of the running loop that
    outlives any one waiter: a request its job stopped waiting for goes on to its answer (or
    its own timeout), and a stopping process does not wait for it."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[bytes] = loop.create_future()

    def settle(result: bytes | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result or b"")

    def run() -> None:
        try:
            outcome: tuple[bytes | None, BaseException | None] = (fn(), None)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiter
            outcome = (None, exc)
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(settle, *outcome)

    # Nobody may be waiting when it ends: its outcome is read here, so it is never "unretrieved".
    future.add_done_callback(lambda f: f.cancelled() or f.exception())
    threading.Thread(target=run, name="memoryd-chat-held", daemon=True).start()
    return future


@dataclass(frozen=True)
class Shape:
    """How a request is put to an endpoint: the output mode, and the name the answer's token
    bound is sent under."""

    mode: str
    tokens_field: str = "max_tokens"


@dataclass(frozen=True)
class Probe:
    """What a probe sends instead of a job's content: a transcript of memoryd's own, and the
    caller's schema as it would be for that transcript (naming no turn of any job)."""

    user: str
    schema: dict[str, Any]


class ChatClient:
    """Asks an OpenAI-compatible chat model for JSON documents."""

    def __init__(self, url: str, model: str, api_key: str = "", timeout: float = 60.0, *, output: str = "auto",
                 max_tokens: int = 2048, threads: int = 2, hold: float = 0.0) -> None:
        http_endpoint(url, "extraction_url", "extraction_api_key")
        if output not in OUTPUT_MODES:
            raise ValueError(f"extraction_output must be one of {', '.join(OUTPUT_MODES)}, got {output!r}")
        self._endpoint = JsonEndpoint(url.strip().rstrip("/") + "/chat/completions", api_key, timeout,
                                      threads=threads, name="chat")
        self._where = self._endpoint.where
        self.model = model.strip()
        self._api_key = api_key
        self._output = output
        self.max_tokens = max_tokens
        # How long a request is kept open when its caller stops waiting at the timeout.
        self._hold = hold
        # What this endpoint (its URL and this model) takes, as learnt from its answers.
        self.shape = Shape("json_schema" if output == "auto" else output)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self._endpoint.url!r}, model={self.model!r}, shape={self.shape!r})"

    @property
    def endpoint(self) -> str:
        """The URL requests go to: what a deployment's concurrency limit is counted per."""
        return self._endpoint.url

    @property
    def where(self) -> str:
        """The endpoint's host and port, for messages."""
        return self._where

    @property
    def mode(self) -> str:
        """The output mode in use now."""
        return self.shape.mode

    def body(self, system: str, user: str, schema_name: str, schema: dict[str, Any], shape: Shape | None = None, *,
             max_tokens: int | None = None) -> dict[str, Any]:
        """The request for one JSON document under ``schema``, in ``shape`` (the one in use now)."""
        shape = shape or self.shape
        bound = self.max_tokens if max_tokens is None else max_tokens
        if shape.mode != "json_schema":
            system += ("\n\nAnswer with one JSON object, and nothing else, that follows this JSON schema:\n"
                       + json.dumps(schema, ensure_ascii=False, separators=(",", ":")))
        body: dict[str, Any] = {
            "model": self.model,
            "temperature": 0,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        }
        if bound:
            body[shape.tokens_field] = bound
        if shape.mode == "json_schema":
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": schema_name, "strict": True, "schema": schema}}
        elif shape.mode == "json_object":
            body["response_format"] = {"type": "json_object", "schema": schema}
        return body

    async def ask(self, system: str, user: str, schema_name: str, schema: dict[str, Any], *, probe: Probe,
                  salvage: str = "") -> Any:
        """The JSON document the model answers ``user`` with, under ``schema``; ``probe``: what
        to send instead of ``user`` and ``schema`` to learn what the endpoint takes;
        ``salvage``: see ``answer_document``."""
        shape = self.shape
        while True:
            try:
                raw = await self._post(self.body(system, user, schema_name, schema, shape))
            except HttpStatus as answer:
                better = await self._better_shape(shape, answer.status, schema_name, probe)
                if better is None:
                    raise status_error(answer.status, answer.body, self._where, secrets=(self._api_key,),
                                       retry_after=answer.retry_after) from None
                shape = better  # later than ``shape``: this ends
                continue
            except Unreachable as exc:
                raise self._unreachable(exc) from exc
            return answer_document(raw, self.max_tokens, salvage=salvage)

    async def _post(self, body: dict[str, Any]) -> bytes:
        if self._hold <= self._endpoint.timeout:
            return await self._endpoint.call(functools.partial(self._endpoint.post, body))
        # The request stays open up to ``hold`` on a thread of its own; the caller waits for
        # it up to the timeout only, and is told of it as ``pending`` (see ``held``).
        request = held(functools.partial(self._endpoint.post, body, self._hold))
        try:
            return await asyncio.wait_for(asyncio.shield(request), self._endpoint.timeout)
        except TimeoutError:
            raise Unreachable("TimeoutError", timed_out=True, pending=request) from None

    def _later(self, shape: Shape, status: int) -> list[Shape]:
        """The shapes to try after ``shape`` was answered ``status``, in order: the other token
        bound (OpenAI answers 400), then the next modes (under "auto" only)."""
        later = []
        if status == 400 and self.max_tokens and shape.tokens_field == _TOKEN_FIELDS[0]:
            later.append(replace(shape, tokens_field=_TOKEN_FIELDS[1]))
        if self._output == "auto":
            later += [replace(shape, mode=mode) for mode in _MODES[_MODES.index(shape.mode) + 1:]]
        return later

    async def _better_shape(self, shape: Shape, status: int, schema_name: str, probe: Probe) -> Shape | None:
        """The shape to send again in after ``shape`` was answered ``status``, learnt from the
        endpoint's answers to probes (see the module's doc); None: report the error."""
        if status not in _FORMAT_STATUSES:
            return None
        if self.shape != shape:  # another request learnt meanwhile
            return self._ahead_of(shape)
        later = self._later(shape, status)
        if not later or await self._takes(shape, schema_name, probe) is not False:
            return None
        for candidate in later:
            taken = await self._takes(candidate, schema_name, probe)
            if taken is None:
                return None
            if taken:
                if await self._takes(shape, schema_name, probe) is not False:
                    return None  # the first refusal was passing
                self._learn(shape, candidate, status)
                return self._ahead_of(shape)
        return None

    def _ahead_of(self, shape: Shape) -> Shape | None:
        """The shape in use now if it is later than ``shape`` (shapes only move forward)."""
        now = self.shape
        forward = (_MODES.index(now.mode) >= _MODES.index(shape.mode)
                   and _TOKEN_FIELDS.index(now.tokens_field) >= _TOKEN_FIELDS.index(shape.tokens_field))
        return now if forward and now != shape else None

    async def _takes(self, shape: Shape, schema_name: str, probe: Probe) -> bool | None:
        """Whether the endpoint takes a probe in ``shape``: True, False (a status that may mean
        "not this format"), or None (it could not tell: another status, no answer)."""
        body = self.body(PROBE_SYSTEM, probe.user, schema_name, probe.schema, shape,
                         max_tokens=min(self.max_tokens, PROBE_TOKENS))
        try:
            await self._post(body)
        except HttpStatus as answer:
            return False if answer.status in _FORMAT_STATUSES else None
        except Unreachable:
            return None
        return True

    def _learn(self, was: Shape, shape: Shape, status: int) -> None:
        if self.shape != was:
            return
        self.shape = shape
        if shape.mode != was.mode:
            _log.warning("the chat model at %s does not take output mode %s (HTTP %d); using output mode %s",
                         self._where, was.mode, status, shape.mode)
        if shape.tokens_field != was.tokens_field:
            _log.warning("the chat model at %s takes %s, not %s", self._where, shape.tokens_field, was.tokens_field)

    def _unreachable(self, exc: Unreachable) -> ExtractionUnavailable:
        if exc.timed_out:
            return ExtractionUnavailable(f"the extraction model at {self._where} timed out after "
                                         f"{self._endpoint.timeout:g}s", "the extraction model did not answer in time",
                                         timed_out=True, pending=exc.pending)
        if exc.cause == "closed":
            return ExtractionUnavailable("the extraction client is closed")
        return ExtractionUnavailable(f"the extraction model at {self._where} cannot be reached ({exc.cause})")

    def close(self) -> None:
        self._endpoint.close()
