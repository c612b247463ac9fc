"""A fake embedding endpoint for the scale benchmark, served over real HTTP: deterministic unit
vectors of a text (``unit_vector``), so indexing and recall cost what Milvus and Postgres cost,
not what a model costs. The one outside service a benchmark may fake (it is not memoryd).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import random
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any





DIM = 384


ENDPOINT_MODEL = "bench-random-384"


def unit_vector(text: str, dim: int = DIM) -> list[float]:
    """A deterministic pseudo-random unit vector for ``text`` (seeded by its SHA-256)."""
    rng = random.Random(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"))
    vector = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    norm = math.sqrt(math.fsum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class EmbeddingEndpoint:
    """``POST /v1/embeddings`` on 127.0.0.1 (a free port), answering ``unit_vector`` per input."""

    def __init__(self, dim: int = DIM) -> None:
        self.dim = dim
        self.requests = 0
        self.inputs = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="bench-embeddings", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_port}"

    def __enter__(self) -> EmbeddingEndpoint:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def _count(self, inputs: int) -> None:
        with self._lock:
            self.requests += 1
            self.inputs += inputs


def _packed(vector: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


def _handler(endpoint: EmbeddingEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 30

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw)
                texts = [str(t) for t in body["input"]]
            except (ValueError, KeyError, TypeError):
                self._send(400, {"error": {"message": "'input' must be a list", "type": "invalid_request_error"}})
                return
            endpoint._count(len(texts))
            # As OpenAI answers: float32 in base64 when asked (memoryd asks), else numbers.
            packed = body.get("encoding_format") == "base64"
            data = [{"object": "embedding", "index": i,
                     "embedding": _packed(unit_vector(t, endpoint.dim)) if packed else unit_vector(t, endpoint.dim)}
                    for i, t in enumerate(texts)]
            self._send(200, {"object": "list", "data": data, "model": ENDPOINT_MODEL})

        def _send(self, status: int, payload: Any) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def endpoint_environment(endpoint: EmbeddingEndpoint) -> dict[str, str]:
    return {"MEMORYD_EMBEDDER": "openai", "MEMORYD_EMBEDDER_URL": endpoint.base_url,
            "MEMORYD_EMBEDDER_MODEL": ENDPOINT_MODEL, "MEMORYD_EMBEDDER_DIM": str(DIM)}
