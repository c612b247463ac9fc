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
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import struct
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

Failure = Literal["500", "429", "400", "hang", "malformed_json", "wrong_dim"]
FAILURES: tuple[Failure, ...] = ("500", "429", "400", "hang", "malformed_json", "wrong_dim")


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
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: Any  # the parsed JSON body, or None if it was not JSON


class FakeOpenAI:
    """A ``ThreadingHTTPServer`` on 127.0.0.1 (a free port), serving while in ``with``."""

    def __init__(self, dim: int = 8, *, hang_seconds: float = 5.0, refuses_base64: bool = False) -> None:
        self.dim = dim
        self.hang_seconds = hang_seconds
        self.refuses_base64 = refuses_base64
        self.answer_with: Any = None
        self._failures: deque[Failure] = deque()
        self._requests: list[RecordedRequest] = []
        self._chat_script: deque[Any] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        # Handler threads are joined on close; "hang" ends when _stopping is set, so close is quick.
        self._httpd.daemon_threads = False
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_port}"

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

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == "/v1/chat/completions"]

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
                return self._chat_script.popleft() if self._chat_script else {"items": []}
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
            failure = server._record(RecordedRequest("POST", self.path, headers, body))
            if self.path == "/v1/chat/completions" and not (isinstance(failure, str) and failure in FAILURES):
                if isinstance(failure, Slow):
                    server._stopping.wait(failure.seconds)
                    failure = failure.answer
                content = failure if isinstance(failure, str) else json.dumps(failure, ensure_ascii=False)
                self._send(200, {"id": "chatcmpl-fake", "object": "chat.completion", "model": (body or {}).get("model", ""),
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": content}}]})
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

        def _send(self, status: int, payload: Any) -> None:
            self._send_raw(status, json.dumps(payload).encode())

        def _send_raw(self, status: int, raw: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            try:
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (a timeout under test)

    return Handler
