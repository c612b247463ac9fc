"""A real HTTP server that speaks OpenAI's ``POST /v1/embeddings``, for tests.

::

    with FakeOpenAI(dim=8) as server:
        embedder = OpenAICompatibleEmbedder(server.base_url, "fake-model", api_key="sk-test")
        server.fail_next("500", "429")     # the next two requests fail, then normal answers
        ...
        server.requests[-1].headers["authorization"]   # "Bearer sk-test"
        server.requests[-1].body["input"]              # the batch that was sent

Answers are deterministic: ``vector_for(text, dim)`` is what the server returns for
``text`` (before the client normalises it; it is deliberately not unit length). The
``data`` list is sent in REVERSE index order, as servers are allowed to, so clients must
sort by ``index``. A request with ``"encoding_format": "base64"`` gets each vector as base64
of little-endian float32, as OpenAI sends it — unless the server was made with
``refuses_base64=True``: then such a request is refused with HTTP 400, as some servers refuse
fields they do not know. ``answer_with``, when set, is sent as every embeddings answer
(status 200), whatever was asked.

Failure modes for ``fail_next`` (each one is used up by one request):

- ``"500"``, ``"429"``: that status with an OpenAI-style error body.
- ``"400"``: status 400 whose error message echoes the Authorization header it received,
  as some real servers do with a refused key.
- ``"echo"``: status 400 whose error message repeats what was sent (the last chat message —
  the turns — or the last input) as JSON: quotes escaped, everything beyond ASCII as
  ``\\uXXXX``, as servers quote a request they could not process.
- ``"refuse_format"``: status 400 naming ``param: "response_format"``, as OpenAI refuses a
  schema it cannot take — for this one request, not for those after it.
- ``"hang"``: answer nothing for ``hang_seconds`` (or until the server stops), then close the
  connection without a response. Use a client timeout shorter than ``hang_seconds``.
- ``"malformed_json"``: status 200 with a body that is not JSON.
- ``"wrong_dim"``: status 200 with vectors of ``dim + 1`` dimensions.

It also speaks ``POST /v1/chat/completions``, with scripted answers for the extraction model::

    server.script_chat({"items": [...]}, "500", "not json")
    # the next chat requests get: that JSON as the message content; HTTP 500; the content
    # "not json". A failure mode of ``fail_next`` ("500", "429", "400", "hang",
    # "malformed_json": a body that is not JSON at all) is that failure; any other string is
    # sent as the message content; Slow(seconds, answer) sends the answer late. With the script used up, the answer is {"items": []}.
    server.chat_requests[-1].body["messages"]
    server.probes       # memoryd's format probes (``memoryd.server.ingest._chat``), apart

A probe (its system message is memoryd's ``PROBE_SYSTEM``) is taken or refused by the
flavour like any request, but uses up no scripted answer and is not in ``chat_requests``;
``script_probes("500")`` fails the next probes the same way ``script_chat`` does requests.

``flavour`` makes the chat endpoint take requests as a real server does (each quirk was seen
on that server; the scripted answer is used only by a request the flavour accepts):

- ``"openai"`` (the default): everything memoryd sends; ``json_object`` only if a message
  says "json" (HTTP 400 otherwise, as OpenAI answers);
- ``"openai-reasoning"``: as openai, but ``max_tokens`` is refused with HTTP 400 naming
  ``max_completion_tokens`` (OpenAI's o-series);
- ``"vllm"``: a 4096-token context: ``max_tokens`` above 4096 minus the prompt is HTTP 400
  "This model's maximum context length is 4096 tokens…";
- ``"llama-server"``: llama.cpp's server before structured outputs: ``json_schema`` is HTTP
  500 "response_format type must be one of "text" or "json_object", but got: json_schema";
- ``"llama-cpp-python"``: 0.3.x: ``json_schema`` fails validation, answered as HTTP 500 by
  its error handler; ``json_object`` with a ``schema`` is taken;
- ``"ollama-0.4"``: ``response_format`` is ignored and the JSON comes in a Markdown fence
  after a sentence of prose.

``Cut(content)`` answers ``content`` with ``finish_reason: "length"`` (cut at max_tokens).
``chat_peak`` is the most chat requests that were in flight at once.

A model server that is out for a while: ``overloaded(503, retry_after="1")`` answers every
chat request (probes too) with that status (and header) until ``overloaded(None)``; the
requests are recorded as usual. ``down()`` closes the listening socket — connections are
refused — until ``up()`` listens on the same port again (nothing is recorded meanwhile).
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

from memoryd.server.ingest._chat import PROBE_SYSTEM

Failure = Literal["500", "429", "400", "echo", "refuse_format", "hang", "malformed_json", "wrong_dim"]
FAILURES: tuple[Failure, ...] = ("500", "429", "400", "echo", "refuse_format", "hang", "malformed_json", "wrong_dim")


def echo_traces(*texts: str) -> set[str]:
    """What an error that echoes ``texts`` may carry of them: each word of 4 letters or more,
    each 16-character window, as written and JSON-escaped (``\\"``, ``\\uXXXX``). A text
    memoryd keeps must hold none of them."""
    traces = {word for text in texts for word in re.findall(r"\w{4,}", text)}
    for text in texts:
        for i in range(max(1, len(text) - 15)):
            window = text[i:i + 16]
            traces |= {window, json.dumps(window)[1:-1], json.dumps(window, ensure_ascii=False)[1:-1]}
    return traces


# memoryd's random identifiers (request, trace and job ids, the suite's unique names): hex. A
# trace of four hex characters — the year a turn is dated, "2024" — is in one by chance (the
# log of an extraction server has ~24,000 places for it: a 31 % chance), and that says
# nothing of an echo. A run of hex with no letter (a phone number) is no identifier.
_IDENTIFIERS = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
                          r"|\b(?=[0-9]*[a-f])[0-9a-f]{10,}\b")


def echoes(texts: tuple[str, ...] | list[str], kept: list[str]) -> list[str]:
    """The traces of ``texts`` (``echo_traces``) in any of ``kept``, once memoryd's random
    identifiers are taken out of them: what memoryd kept of an echo of ``texts``."""
    kept = [_IDENTIFIERS.sub("<id>", text) for text in kept]
    return sorted(trace for trace in echo_traces(*texts) if any(trace in text for text in kept))


def vector_for(text: str, dim: int) -> list[float]:
    """The server's (unnormalised) vector for ``text``: seeded by the text's hash."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    rng = random.Random(seed)
    return [rng.gauss(0.0, 3.0) for _ in range(dim)]


@dataclass(frozen=True)
class Slow:
    """A scripted chat answer sent only after ``seconds``."""

    seconds: float
    answer: Any


@dataclass(frozen=True)
class Cut:
    """A scripted chat answer cut off at max_tokens."""

    content: str


FLAVOURS = ("openai", "openai-reasoning", "vllm", "llama-server", "llama-cpp-python", "ollama-0.4")
CONTEXT_TOKENS = 4096  # the "vllm" flavour's context length


def _refusal(flavour: str, body: Any) -> tuple[int, Any] | None:
    """The error a server of ``flavour`` answers this chat request with, if it refuses it."""
    if not isinstance(body, dict):
        return 400, {"error": {"message": "the body is not JSON", "type": "invalid_request_error"}}
    kind = (body.get("response_format") or {}).get("type")
    said = json.dumps(body.get("messages", []), ensure_ascii=False).lower()
    if flavour in ("openai", "openai-reasoning") and kind == "json_object" and "json" not in said:
        return 400, {"error": {"message": "'messages' must contain the word 'json' in some form, to use "
                                          "'response_format' of type 'json_object'.",
                               "type": "invalid_request_error", "param": "messages", "code": None}}
    if flavour == "openai-reasoning" and "max_tokens" in body:
        return 400, {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                          "Use 'max_completion_tokens' instead.",
                               "type": "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter"}}
    if flavour == "vllm":
        prompt = len(said) // 4  # roughly, as a tokenizer would count
        asked = int(body.get("max_tokens") or 0)
        if asked > CONTEXT_TOKENS - prompt:
            return 400, {"object": "error", "message": f"This model's maximum context length is {CONTEXT_TOKENS} "
                         f"tokens. However, you requested {asked + prompt} tokens ({prompt} in the messages, {asked} "
                         "in the completion). Please reduce the length of the messages or completion.",
                         "type": "BadRequestError", "param": None, "code": 400}
    if flavour == "llama-server" and kind == "json_schema":
        return 500, {"error": {"code": 500, "message": 'response_format type must be one of "text" or "json_object", '
                                                       "but got: json_schema", "type": "server_error"}}
    if flavour == "llama-cpp-python" and kind == "json_schema":
        return 500, {"error": {"message": "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
                                          "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}]",
                               "type": "internal_server_error", "param": None, "code": None}}
    return None


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: Any  # the parsed JSON body, or None if it was not JSON
    at: float = 0.0  # time.monotonic() when it arrived

    @property
    def probe(self) -> bool:
        """Whether this is one of memoryd's format probes."""
        messages = self.body.get("messages") if isinstance(self.body, dict) else None
        first = messages[0] if isinstance(messages, list) and messages else None
        return isinstance(first, dict) and str(first.get("content", "")).startswith(PROBE_SYSTEM)


class FakeOpenAI:
    """A ``ThreadingHTTPServer`` on 127.0.0.1 (a free port), serving while in ``with``."""

    def __init__(self, dim: int = 8, *, hang_seconds: float = 5.0, refuses_base64: bool = False,
                 flavour: str = "openai") -> None:
        if flavour not in FLAVOURS:
            raise ValueError(f"unknown flavour {flavour!r}; expected one of {FLAVOURS}")
        self.dim = dim
        self.flavour = flavour
        self.chat_peak = 0
        self._chat_in_flight = 0
        self.hang_seconds = hang_seconds
        self.refuses_base64 = refuses_base64
        self.answer_with: Any = None
        self._failures: deque[Failure] = deque()
        self._requests: list[RecordedRequest] = []
        self._chat_script: deque[Any] = deque()
        self._probe_script: deque[Any] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._overloaded: tuple[int, str | None] | None = None
        self._httpd = self._listen(0)
        self._port = self._httpd.server_port
        self._thread = self._serving()

    def _listen(self, port: int) -> ThreadingHTTPServer:
        httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        # Handler threads are joined on close; "hang" ends when _stopping is set, so close is quick.
        httpd.daemon_threads = False
        return httpd

    def _serving(self) -> threading.Thread:
        return threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                name="fake-openai", daemon=True)

    def overloaded(self, status: int | None, retry_after: str | None = None) -> None:
        """Answer every chat request with ``status`` (and ``Retry-After``) until called with None."""
        with self._lock:
            self._overloaded = None if status is None else (status, retry_after)

    def down(self) -> None:
        """Stop listening: connections are refused until ``up``."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def up(self) -> None:
        """Listen again, on the same port."""
        self._httpd = self._listen(self._port)
        self._thread = self._serving()
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    def fail_next(self, *failures: Failure) -> None:
        """Queue failures for the next requests, in order; after them, answers are normal."""
        unknown = [f for f in failures if f not in FAILURES]
        if unknown:
            raise ValueError(f"unknown failure modes {unknown}; expected some of {FAILURES}")
        with self._lock:
            self._failures.extend(failures)

    def script_chat(self, *answers: Any) -> None:
        """Queue answers for the next chat completion requests, in order."""
        with self._lock:
            self._chat_script.extend(answers)

    def script_probes(self, *answers: Any) -> None:
        """Queue answers for the next probes, in order (after them, probes are taken)."""
        with self._lock:
            self._probe_script.extend(answers)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The chat requests of memoryd's work (not its probes)."""
        return [r for r in self.requests if r.path == "/v1/chat/completions" and not r.probe]

    @property
    def probes(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == "/v1/chat/completions" and r.probe]

    def recover(self) -> None:
        """Drop the failures still queued: from now on every request is answered."""
        with self._lock:
            self._failures.clear()

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()  # joins the handler threads
        self._thread.join()

    # Called from handler threads.

    def _record(self, request: RecordedRequest) -> Any:
        with self._lock:
            self._requests.append(request)
            if request.path == "/v1/chat/completions":
                refused = _refusal(self.flavour, request.body)
                if refused is not None:
                    return refused
                script = self._probe_script if request.probe else self._chat_script
                return script.popleft() if script else {"items": []}
            return self._failures.popleft() if self._failures else None


def _base64(vector: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


def _handler_for(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = 10  # a client that connects and never sends cannot hold a thread forever

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = None
            headers = {name.lower(): value for name, value in self.headers.items()}
            with server._lock:
                overloaded = server._overloaded
            if self.path == "/v1/chat/completions" and overloaded is not None:
                with server._lock:
                    server._requests.append(RecordedRequest("POST", self.path, headers, body, time.monotonic()))
                status, retry_after = overloaded
                self._send(status, {"error": {"message": "the server is busy", "type": "server_error"}},
                           {"Retry-After": retry_after} if retry_after else {})
                return
            failure = server._record(RecordedRequest("POST", self.path, headers, body, time.monotonic()))
            if self.path == "/v1/chat/completions" and isinstance(failure, tuple):
                self._send(*failure)  # the flavour refuses the request
            elif self.path == "/v1/chat/completions" and not (isinstance(failure, str) and failure in FAILURES):
                with server._lock:
                    server._chat_in_flight += 1
                    server.chat_peak = max(server.chat_peak, server._chat_in_flight)
                try:
                    self._chat(failure, body)
                finally:
                    with server._lock:
                        server._chat_in_flight -= 1
            elif self.path not in ("/v1/embeddings", "/v1/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            elif failure == "hang":
                server._stopping.wait(server.hang_seconds)
                self.close_connection = True  # and no response at all
            elif failure in ("500", "429"):
                self._send(int(failure), {"error": {"message": "try again later", "type": "server_error"}})
            elif failure == "400":
                received = headers.get("authorization", "")
                self._send(400, {"error": {"message": f"Incorrect API key provided: {received}",
                                           "type": "invalid_request_error"}})
            elif failure == "echo":
                sent = body.get("messages", body.get("input")) if isinstance(body, dict) else body
                sent = sent[-1] if isinstance(sent, list) and sent else sent  # the user's turns, or the last input
                self._send(400, {"error": {"message": f"could not process the request: {json.dumps(sent)}",
                                           "type": "invalid_request_error", "param": None, "code": None}})
            elif failure == "refuse_format":
                self._send(400, {"error": {"message": "Invalid schema for response_format 'memory_items'.",
                                           "type": "invalid_request_error", "param": "response_format",
                                           "code": None}})
            elif failure == "malformed_json":
                self._send_raw(200, b'{"data": [{"index": 0, "embedding": [0.1, ')
            elif not isinstance(body, dict) or not isinstance(body.get("input"), list):
                self._send(400, {"error": {"message": "'input' must be a list", "type": "invalid_request_error"}})
            elif server.answer_with is not None:
                self._send(200, server.answer_with)
            elif "encoding_format" in body and server.refuses_base64:
                self._send(400, {"error": {"message": "Unrecognized request argument: encoding_format",
                                           "type": "invalid_request_error"}})
            else:
                dim = server.dim + 1 if failure == "wrong_dim" else server.dim
                texts = [str(text) for text in body["input"]]
                packed = body.get("encoding_format") == "base64"
                data = [{"object": "embedding", "index": i,
                         "embedding": _base64(vector_for(text, dim)) if packed else vector_for(text, dim)}
                        for i, text in enumerate(texts)]
                self._send(200, {"object": "list", "data": data[::-1], "model": body.get("model", ""),
                                 "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)}})

        def _chat(self, answer: Any, body: Any) -> None:
            if isinstance(answer, Slow):
                server._stopping.wait(answer.seconds)
                answer = answer.answer
            finish = "stop"
            if isinstance(answer, Cut):
                answer, finish = answer.content, "length"
            content = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
            if server.flavour == "ollama-0.4" and finish == "stop":
                content = f"Here are the memories I found:\n```json\n{content}\n```"
            self._send(200, {"id": "chatcmpl-fake", "object": "chat.completion", "model": (body or {}).get("model", ""),
                             "choices": [{"index": 0, "finish_reason": finish,
                                          "message": {"role": "assistant", "content": content}}]})

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            self._send_raw(status, json.dumps(payload).encode(), headers)

        def _send_raw(self, status: int, raw: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            try:
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (a timeout under test)

    return Handler
