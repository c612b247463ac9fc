"""What can go wrong when memoryd asks its chat model (extraction, consolidation), and what an
error from the model's server may repeat.

The worker treats each error differently:

- ``ExtractionUnavailable``: timeouts, connection errors, HTTP 408/429/5xx — retried later;
- ``ExtractionRefused``: another HTTP 4xx — the request itself is wrong, retrying cannot help;
- ``ExtractionParseError``: an answer that is not JSON or not what was asked.

Each has a ``message``, which a job's ``error`` (and so its agent) sees, and a ``detail`` for
the server's log. When the server answered with an error, both quote an excerpt of its body
(``error_excerpt``): that is what tells an operator why ("response_format type must be one
of text or json_object", "maximum context length is 4096 tokens"). The excerpt is made safe
first, because a job's error is kept in the clear while its turns are sealed with the
subject's key — it must not outlive an erasure with the user's words in it:

- the API key, bearer tokens, ``sk-…`` keys and ``key=value`` secrets are replaced;
- any stretch the server echoed from the request's turns is cut out (16 characters, or 6
  Chinese or Japanese ones, found word for word in the transcript);
- identity and financial numbers are redacted (``_pii``), control characters dropped;
- it is cut to ``EXCERPT_CHARS``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from ._pii import screened

EXCERPT_CHARS = 240
_ECHO_LATIN, _ECHO_WIDE = 16, 6  # the shortest echoed stretch cut out
_WIDE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]+")
_SECRETS = [
    re.compile(r"(?i)\bbearer\s+[^\s\"',;]+"),
    re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"),
    re.compile(r"(?i)\b(api[_-]?key|authorization|access[_-]?token|token|password|secret)"
               r"(\W{0,3}[:=][\s\"']{0,2})[^\s\"',;}&)\]]+"),
]


class ExtractionError(Exception):
    """``message``: what happened, safe to store on a job and show its agent; ``detail``: the
    specifics, for the server's log only."""

    public = "the extraction model failed"

    def __init__(self, detail: str, message: str = "") -> None:
        self.message = message or self.public
        self.detail = detail
        super().__init__(self.message)


class ExtractionUnavailable(ExtractionError):
    """The model could not be reached, was overloaded or did not answer in time; try again
    later. ``timed_out``: the request was abandoned while the model may still be working on it."""

    public = "the extraction model could not be reached"

    def __init__(self, detail: str, message: str = "", *, timed_out: bool = False) -> None:
        super().__init__(detail, message)
        self.timed_out = timed_out


class ExtractionRefused(ExtractionError):
    """The endpoint refused the request (4xx other than 408/429)."""

    public = "the extraction model refused the request"


class ExtractionParseError(ExtractionError):
    """The answer was not JSON or did not follow the schema."""

    public = "the extraction model's answer could not be parsed"


def _said(body: bytes) -> str:
    """The error message of an error body: OpenAI's ``error.message``, vLLM's ``message``,
    FastAPI's ``detail``, or the body's text."""
    text = body.decode("utf-8", "replace")
    try:
        document = json.loads(text)
    except ValueError:
        return text
    if isinstance(document, dict):
        error = document.get("error")
        if isinstance(error, dict) and isinstance(message := error.get("message"), str):
            return message
        for name in ("error", "message", "detail"):
            value = document.get(name)
            if isinstance(value, str):
                return value
            if value is not None:
                return json.dumps(value, ensure_ascii=False)
    return text


def _echoes_cut(text: str, transcript: str) -> str:
    """``text`` without the stretches it repeats word for word from ``transcript``."""
    hay = " ".join(transcript.split()).lower()
    low = text.lower()
    if not hay:
        return text
    keep = [True] * len(text)
    i = 0
    while i < len(text):
        shortest = _ECHO_WIDE if _WIDE.match(text, i) else _ECHO_LATIN
        end = i + shortest
        if end <= len(text) and low[i:end] in hay:
            while end < len(text) and low[i:end + 1] in hay:
                end += 1
            keep[i:end] = [False] * (end - i)
            i = end
        else:
            i += 1
    out, cutting = [], False
    for char, kept in zip(text, keep):
        if kept:
            out.append(char)
            cutting = False
        elif not cutting:
            out.append("…")
            cutting = True
    return "".join(out)


def error_excerpt(body: bytes, *, secrets: Sequence[str] = (), transcript: str = "") -> str:
    """A short, safe excerpt of an error body from the model's server (see the module's doc)."""
    text = " ".join(_CONTROL.sub(" ", _said(body[:16 * 1024])).split())[:EXCERPT_CHARS * 4]
    text = _SECRETS[0].sub("Bearer [redacted]", text)
    text = _SECRETS[1].sub("[redacted]", text)
    text = _SECRETS[2].sub(lambda m: f"{m.group(1)}{m.group(2)}[redacted]", text)
    for secret in secrets:
        if len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    text = screened(_echoes_cut(text, transcript), "redact") or ""
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS - 1].rstrip() + "…"
