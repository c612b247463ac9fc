"""A stand-in extraction model for ``memoryd bench extraction --scripted``: an OpenAI-compatible
``POST …/chat/completions`` on 127.0.0.1 (a free port, standard library only) that answers each
request with the scripted answer of the dialogue it is about.

The dialogue is found by its turns: the request's user message is the transcript memoryd
sends the model, one line per turn. The server writes relative dates out in it ("next Monday
(2026-11-23)"), so those values are taken out again before the turn texts are looked for; the
dialogue with the most turn texts found wins. A request that names no dialogue of the set is
answered HTTP 400, which fails its job at once (so a mismatch shows as a failed job, never as
an empty answer that would look like a model that found nothing).

Every output mode memoryd may use is taken (``response_format`` json_schema, json_object, or
none): the stand-in answers the same whatever the mode, like a model that always writes JSON.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from ._extraction_set import Dialogue

# The value memoryd writes after a relative date before the model reads a turn: "(2026-11-23)",
# "（2026-09）", "(2026-06-20..2026-06-21)".
_WRITTEN_DATE = re.compile(r" ?[(（]\d{4}(?:-\d{2}(?:-\d{2}(?:\.\.\d{4}-\d{2}-\d{2})?)?)?[)）]")


def _plain(text: str) -> str:
    return " ".join(_WRITTEN_DATE.sub("", text).split())


def content_for(answer: Any) -> str:
    """The message content a scripted answer is sent as: a list of items as {"items": …}, an
    object as JSON, a string as it is (a model that did not write JSON)."""
    if isinstance(answer, str):
        return answer
    return json.dumps({"items": answer} if isinstance(answer, list) else answer, ensure_ascii=False)


def dialogue_for(transcript: str, dialogues: Sequence[Dialogue]) -> Dialogue | None:
    """The dialogue whose turns ``transcript`` holds (most turn texts found), or None."""
    plain = _plain(transcript)
    best, found = None, 0
    for dialogue in dialogues:
        count = sum(_plain(turn.text) in plain for turn in dialogue.turns)
        if count > found:
            best, found = dialogue, count
    return best


class ScriptedModel:
    """``with ScriptedModel(dialogues) as model:`` → ``model.base_url`` (…/v1), ``model.requests``."""

    def __init__(self, dialogues: Sequence[Dialogue]) -> None:
        self.dialogues = tuple(dialogues)
        self.requests = 0
        self.unmatched = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-model", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def answer(self, body: Any) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON payload) for one chat completion request body."""
        with self._lock:
            self.requests += 1
        messages = body.get("messages") if isinstance(body, dict) else None
        user = next((m.get("content", "") for m in messages or () if isinstance(m, dict) and m.get("role") == "user"),
                    "")
        dialogue = dialogue_for(user, self.dialogues) if isinstance(user, str) else None
        if dialogue is None:
            with self._lock:
                self.unmatched += 1
            return 400, {"error": {"message": "no scripted dialogue matches this transcript",
                                   "type": "invalid_request_error"}}
        return 200, {"id": f"chatcmpl-scripted-{dialogue.id}", "object": "chat.completion",
                     "model": str(body.get("model", "")),
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": content_for(dialogue.scripted_answer)}}],
                     "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}

    def __enter__(self) -> ScriptedModel:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def _handler(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet: the bench prints its own report
            pass

        def do_POST(self) -> None:
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            except ValueError:
                self._send(400, {"error": {"message": "the body is not JSON"}})
                return
            self._send(*model.answer(body))

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            raw = json.dumps(payload, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler
