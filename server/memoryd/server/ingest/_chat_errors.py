"""What can go wrong when memoryd asks its chat model (extraction, consolidation), and what of
a model server's error memoryd repeats: none of its words.

The worker treats each error differently:

- ``ExtractionUnavailable``: timeouts, connection errors, HTTP 408/429/5xx — retried later;
  an ``outage`` (no answer, a timeout, 408, 429, 502, 503, 504: the model is down or busy,
  and will be back) waits for the model, however long, up to the retry horizon; another
  5xx is retried within the job's attempts (a 500 may be this request's own fault);
- ``ExtractionRefused``: another HTTP 4xx — the request itself is wrong, retrying cannot help;
- ``ExtractionParseError``: an answer that is not JSON or not what was asked.

Each has a ``message``, which a job's ``error`` (so its agent, and the audit event of a
failed job) keeps, and a ``detail`` for the server's log. Neither quotes what the model's
server wrote in its error. A server's error text may repeat the request — the user's turns —
as they were sent, JSON-escaped (``\\"`` splits every quotation), ``\\u``-escaped, cut,
re-tokenised or translated, and no filter recognises every such form. A job's error is kept
in the clear in a row that outlives the job's turns (sealed, then deleted) and an Erase by
source turn, and the log leaves memoryd altogether. So both say only what memoryd chose:

- the HTTP status;
- a reason from the closed list ``REASONS`` (``memoryd.storage.error_reason``, which the
  embedder's errors use too), derived from the status and the error's structured fields —
  ``type``, ``code`` and ``param``, which OpenAI, vLLM and llama.cpp's server set from their
  own code (``context_length_exceeded``, ``param: "max_tokens"``) — never from its message;
- in the ``detail`` only, those structured fields themselves, each where it is a short
  identifier or a number, and is not the API key.

The full error is in the model server's own log, next to the request it answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memoryd.storage import REASONS, error_fields, error_reason

__all__ = ["REASONS", "ExtractionError", "ExtractionParseError", "ExtractionRefused", "ExtractionUnavailable",
           "error_fields", "error_reason", "status_error"]


class ExtractionError(Exception):
    """``message``: what happened, safe to store on a job and show its agent; ``detail``: the
    specifics, for the server's log only. Neither holds text of the model's server."""

    public = "the extraction model failed"

    def __init__(self, detail: str, message: str = "") -> None:
        self.message = message or self.public
        self.detail = detail
        super().__init__(self.message)


class ExtractionUnavailable(ExtractionError):
    """The model could not be reached, was overloaded or did not answer in time; try again
    later. ``timed_out``: the request was abandoned while the model may still be working on
    it (``pending``, if set, ends when the request really does); ``outage``: the model is out
    or overloaded, rather than failing this request; ``retry_after``: the seconds the server
    asked for."""

    public = "the extraction model could not be reached"

    def __init__(self, detail: str, message: str = "", *, timed_out: bool = False, outage: bool = True,
                 retry_after: float | None = None, pending: Any = None) -> None:
        super().__init__(detail, message)
        self.timed_out = timed_out
        self.outage = outage
        self.retry_after = retry_after
        self.pending = pending


class ExtractionRefused(ExtractionError):
    """The endpoint refused the request (4xx other than 408/429)."""

    public = "the extraction model refused the request"


class ExtractionParseError(ExtractionError):
    """The answer was not JSON or did not follow the schema."""

    public = "the extraction model's answer could not be parsed"


# Statuses of a model that is out or overloaded for a while, not of a bad request.
OUTAGE_STATUSES = (408, 429, 502, 503, 504)


def status_error(status: int, body: bytes, where: str, *, secrets: Sequence[str] = (),
                 retry_after: float | None = None) -> ExtractionError:
    """The error of an HTTP ``status`` answer: unavailable (408, 429, 5xx) or refused; its
    message the status and a reason of memoryd's, its detail those and the error's fields."""
    fields = error_fields(body, secrets=secrets)
    why = error_reason(status, fields)
    said = f"HTTP {status}" + (f" ({why})" if why else "")
    shown = " ".join(f"{name}={value}" for name, value in fields.items())
    logged = said + (f"; the server's error has {shown}" if shown else "")
    if status in (408, 429) or status >= 500:
        return ExtractionUnavailable(f"the extraction model at {where} answered {logged}",
                                     f"the extraction model was unavailable: {said}",
                                     outage=status in OUTAGE_STATUSES, retry_after=retry_after)
    return ExtractionRefused(f"the extraction model at {where} refused the request: {logged}",
                             f"the extraction model refused the request: {said}")
