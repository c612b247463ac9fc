"""One small HTTP client for the OpenAI-compatible endpoints memoryd calls: the embedder here,
the extraction and consolidation model in the server (``memoryd.server._chat``).

It does what every such call needs and nothing one caller alone needs: the URL checked (an
http(s) URL with a host and no credentials — a key belongs in a header, never in a URL that
is logged), JSON headers with the key as a bearer token, a POST with a timeout on the
client's own threads (so a slow server never blocks the event loop or starves its default
executor), and the outcome told apart:

- the answer's bytes, for a 2xx;
- ``HttpStatus`` (the status and up to ``MAX_ERROR_BODY`` bytes of the body) for any other
  status — the caller decides what it means (retry, adapt the request, refuse);
- ``Unreachable`` for no answer at all (refused, DNS, reset, truncated, or ``timed_out``).

What an error *says* is each caller's: the embedder speaks the domain's errors, the chat
client its extraction errors with a safe excerpt of the body.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import SplitResult, urlsplit

T = TypeVar("T")
MAX_ERROR_BODY = 64 * 1024


class HttpStatus(Exception):
    """The server answered with a status other than 2xx."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.body = body


class Unreachable(Exception):
    """No answer: ``timed_out`` when the request was abandoned at the timeout (the server
    may still be working on it); ``cause`` names what failed otherwise."""

    def __init__(self, cause: str, *, timed_out: bool = False) -> None:
        super().__init__(cause)
        self.cause = cause
        self.timed_out = timed_out


def http_endpoint(url: str, setting: str, key_setting: str) -> SplitResult:
    """``url`` split, if it is an http(s) URL with a host and no credentials (they belong in
    ``key_setting``, sent as a header); ValueError otherwise."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{setting} must be an http(s) URL with a host, got {url!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{setting} must not carry credentials; set {key_setting} instead")
    return parts


def json_headers(api_key: str) -> dict[str, str]:
    """The headers of a JSON request, with the key as a bearer token if there is one."""
    headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "memoryd"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


class JsonEndpoint:
    """POSTs JSON to ``url`` (already checked and completed by the caller) on ``threads``
    threads of its own."""

    def __init__(self, url: str, api_key: str, timeout: float, *, threads: int, name: str) -> None:
        self.url = url
        self.where = urlsplit(url).netloc  # for messages: no path, no credentials
        self.timeout = timeout
        self._headers = json_headers(api_key)
        self._executor = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix=f"memoryd-{name}-http")

    def post(self, payload: Any) -> bytes:
        """One exchange, on the calling thread (one of ours, through ``call``)."""
        body = json.dumps(payload, ensure_ascii=False).encode()
        request = urllib.request.Request(self.url, data=body, headers=self._headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                data: bytes = response.read()
                return data
        except urllib.error.HTTPError as exc:
            try:
                error_body = exc.read(MAX_ERROR_BODY)
            except (OSError, http.client.HTTPException):
                error_body = b""
            finally:
                exc.close()  # it holds the socket; left open it leaks until garbage collection
            raise HttpStatus(exc.code, error_body) from None
        except (OSError, http.client.HTTPException) as exc:
            timed_out = isinstance(exc, TimeoutError) or "timed out" in str(exc)
            raise Unreachable(type(exc).__name__, timed_out=timed_out) from exc

    async def call(self, fn: Callable[[], T]) -> T:
        """``fn`` (which posts) on this endpoint's threads; Unreachable once it is closed."""
        try:
            future = asyncio.get_running_loop().run_in_executor(self._executor, fn)
        except RuntimeError as exc:  # the executor was shut down
            raise Unreachable("closed") from exc
        return await future

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
