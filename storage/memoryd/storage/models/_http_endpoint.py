"""One small HTTP client for the OpenAI-compatible endpoints memoryd calls: the embedder here,
the extraction and consolidation model in the server (``memoryd.server.ingest._chat``).

It does what every such call needs and nothing one caller alone needs: the URL checked (an
http(s) URL with a host and no credentials — a key belongs in a header, never in a URL that
is logged), JSON headers with the key as a bearer token, a POST with a timeout on the
client's own threads (so a slow server never blocks the event loop or starves its default
executor), and the outcome told apart:

- the answer's bytes, for a 2xx;
- ``HttpStatus`` (the status and up to ``MAX_ERROR_BODY`` bytes of the body) for any other
  status — the caller decides what it means (retry, adapt the request, refuse);
- ``Unreachable`` for no answer at all (refused, DNS, reset, truncated, or ``timed_out``).

What an error says is the caller's to word (the embedder speaks the domain's errors, the
chat client its extraction errors), but what memoryd repeats of a server's error is one rule,
here: never its words. A server's error text may echo the request — memories' text, a user's
turns — escaped, cut or re-tokenised past any filter, and errors are stored (a job's, an
outbox row's) and logged. So an error is told by its HTTP status and a reason from the closed
list ``REASONS`` (``error_reason``), derived from the status and the structured fields OpenAI,
vLLM and llama.cpp's server set from their own code (``error_fields``: ``type``, ``code``,
``param``), never from its message.
"""

from __future__ import annotations

import asyncio
import email.utils
import http.client
import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import SplitResult, urlsplit

T = TypeVar("T")
MAX_ERROR_BODY = 64 * 1024

# The closed list of reasons a job's error may give (besides the HTTP status).
CONTEXT_EXCEEDED = "the request is longer than the model's context"
AUTHENTICATION = "authentication failed"
FORBIDDEN = "permission denied"
NOT_FOUND = "no such model or path"
TOO_LARGE = "the request is too large"
RATE_LIMITED = "rate limited"
SERVER_TIMEOUT = "the server timed out"
RESPONSE_FORMAT = "the server does not take this response_format"
TOKEN_BOUND = "the server does not take max_tokens"
SERVER_ERROR = "server error"
REASONS = (CONTEXT_EXCEEDED, AUTHENTICATION, FORBIDDEN, NOT_FOUND, TOO_LARGE, RATE_LIMITED, SERVER_TIMEOUT,
           RESPONSE_FORMAT, TOKEN_BOUND, SERVER_ERROR)

_FIELDS = ("type", "code", "param")
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]{0,47}")
_KEY_LIKE = re.compile(r"(?i)^(sk|pk|rk)-|bearer")
_CONTEXT_CODES = {"context_length_exceeded", "exceed_context_size_error", "context_window_exceeded"}
_BY_STATUS = {401: AUTHENTICATION, 403: FORBIDDEN, 404: NOT_FOUND, 408: SERVER_TIMEOUT, 413: TOO_LARGE,
              429: RATE_LIMITED}


class HttpStatus(Exception):
    """The server answered with a status other than 2xx; ``retry_after``: the seconds its
    ``Retry-After`` header asked for, if it sent one."""

    def __init__(self, status: int, body: bytes, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.body = body
        self.retry_after = retry_after


class Unreachable(Exception):
    """No answer: ``timed_out`` when the request was abandoned at the timeout (the server
    may still be working on it; ``pending``, if set, ends when the request really does);
    ``cause`` names what failed otherwise."""

    def __init__(self, cause: str, *, timed_out: bool = False, pending: Any = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.timed_out = timed_out
        self.pending = pending


# The longest wait a server's Retry-After is taken at: it keeps the figure finite (delta-seconds
# of 400 digits is float infinity), and a server that asked for more is asked again after a day.
MAX_RETRY_AFTER = 86400.0


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """The seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date), at most
    ``MAX_RETRY_AFTER``; None if it is missing or unreadable."""
    if not value:
        return None
    value = value.strip()
    # ASCII digits only: str.isdigit() also takes "²", which float() refuses.
    if value.isascii() and value.isdigit():
        return min(float(value), MAX_RETRY_AFTER)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return min(max(0.0, when.timestamp() - (time.time() if now is None else now)), MAX_RETRY_AFTER)


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

    def post(self, payload: Any, timeout: float | None = None) -> bytes:
        """One exchange, on the calling thread (one of ours, through ``call``); ``timeout``
        instead of the endpoint's, for a caller that stops waiting sooner itself."""
        body = json.dumps(payload, ensure_ascii=False).encode()
        request = urllib.request.Request(self.url, data=body, headers=self._headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as response:
                data: bytes = response.read()
                return data
        except urllib.error.HTTPError as exc:
            try:
                error_body = exc.read(MAX_ERROR_BODY)
            except (OSError, http.client.HTTPException):
                error_body = b""
            finally:
                exc.close()  # it holds the socket; left open it leaks until garbage collection
            raise HttpStatus(exc.code, error_body, retry_after(exc.headers.get("Retry-After"))) from None
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


def error_fields(body: bytes, *, secrets: Sequence[str] = ()) -> dict[str, str]:
    """The structured fields of a server's error body (``type``, ``code``, ``param`` of
    OpenAI's ``error`` object, or of the body itself as vLLM sends it), those that are short
    identifiers or numbers and not a secret; never its ``message``."""
    try:
        document = json.loads(body[:16 * 1024])
    except ValueError:
        return {}
    if not isinstance(document, dict):
        return {}
    error = document.get("error")
    where = error if isinstance(error, dict) else document
    fields: dict[str, str] = {}
    for name in _FIELDS:
        value = where.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            fields[name] = str(value)
        elif (isinstance(value, str) and _IDENTIFIER.fullmatch(value) and not _KEY_LIKE.search(value)
              and not any(len(s) >= 4 and (s in value or value in s) for s in secrets)):
            fields[name] = value
    return fields


def error_reason(status: int, fields: Mapping[str, str]) -> str:
    """The reason of ``REASONS`` an error with ``status`` and structured ``fields`` gives, or
    '' if none fits."""
    said = {value.lower() for value in fields.values()}
    param = fields.get("param", "").lower()
    if said & _CONTEXT_CODES:
        return CONTEXT_EXCEEDED
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if param.startswith("response_format"):
        return RESPONSE_FORMAT
    if param in ("max_tokens", "max_completion_tokens"):
        return TOKEN_BOUND
    return SERVER_ERROR if status >= 500 else ""
