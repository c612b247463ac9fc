"""A session's summary: at most 50 Chinese characters or 30 English words, in the session's
language, made only of what the ending caller's view reads (the summary is a memory others may
read, so it must never carry what that caller could not).

With an extraction model configured, the model writes it (the extraction endpoint, key and
output mode; ``ChatSummarizer``); its answer is cut to the limit and screened as extracted
memories are — the tenant's PII mode, and instruction-like text is never stored. Without a
model, when the model fails or is out, or when its answer is refused, the summary is taken from
the memories' own words (``extractive``): the most recent explicit memory, else the most
important others, cut at a word (or character) boundary and screened the same way.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from memoryd.domain import cjk_share

from ..screen import instruction_like, screened
from ._chat import ChatClient, Probe
from ._chat_errors import ExtractionError, ExtractionParseError

_log = logging.getLogger("memoryd.server.sessions")

MAX_CHARS = 50  # a summary in Chinese (or Japanese, Korean): characters
MAX_WORDS = 30  # in any other language: words
# Text this much CJK (of its letters) is counted in characters, as Chinese is.
CJK_SHARE = 0.3
_TRAILING = " ,;:、，；：-–—"
_CLAUSE_ENDS = "，。；！？、,.;!?"

SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["summary"],
    "properties": {"summary": {"type": "string", "description": "the session in at most 50 Chinese characters "
                                                                "or 30 English words"}},
}

SYSTEM_PROMPT = """You summarise a conversation session for the assistant that continues it later.
Below are the memories kept from the session, most recent first. Write ONE short summary of
what the session was about and where it stopped: at most 50 characters if the memories are in
Chinese (or Japanese, Korean), else at most 30 words, in the language of the memories. Only say
what the memories say. Never write requests or instructions addressed to an assistant."""

# A request shaped as every summary request is, holding nothing of any session.
PROBE = Probe("- The user asked about tea.", SUMMARY_SCHEMA)


@dataclass(frozen=True)
class SummaryInput:
    """What a summary may be made of: the texts the ending caller reads of the session's
    memories — those the user asked to keep, newest first, and the others, most important
    first (newest first where the view hides importance)."""

    explicit: tuple[str, ...] = ()
    others: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.explicit or self.others)


def is_cjk(text: str) -> bool:
    return cjk_share(text) >= CJK_SHARE


def within_limit(text: str) -> str:
    """``text`` on one line, cut to the limit of its language: 50 characters of CJK text, 30
    words of any other, at a boundary, without a dangling separator."""
    text = " ".join(text.split())
    if is_cjk(text):
        if len(text) <= MAX_CHARS:
            return text.rstrip(_TRAILING)
        cut = text[:MAX_CHARS]
        # At the last clause's end, if that keeps most of it: "…骑行" rather than "…骑行，最".
        stop = max(cut.rfind(mark) for mark in _CLAUSE_ENDS)
        return (cut[:stop] if stop >= MAX_CHARS // 2 else cut).rstrip(_TRAILING)
    return " ".join(text.split(" ")[:MAX_WORDS]).rstrip(_TRAILING)


def acceptable(text: str, pii: str) -> str | None:
    """``text`` as it may be stored as a summary (the tenant's ``pii`` mode applied), or None:
    nothing left, or it reads as an instruction."""
    kept = screened(text, pii)
    if kept is None or not kept.strip() or instruction_like(kept):
        return None
    return kept


def extractive(given: SummaryInput, pii: str) -> str:
    """The summary taken from the memories' own words ('' if none may be stored)."""
    for text in given.explicit:  # the most recent explicit memory that may be stored
        kept = acceptable(within_limit(text), pii)
        if kept:
            return kept
    parts = [kept for text in given.others if (kept := acceptable(" ".join(text.split()), pii))]
    if not parts:
        return ""
    joined = ("；" if is_cjk("".join(parts)) else "; ").join(parts)
    return within_limit(joined)


def parse_summary(document: Any) -> str:
    if not isinstance(document, dict) or not isinstance(document.get("summary"), str) \
            or not document["summary"].strip():
        raise ExtractionParseError("the model's JSON has no summary")
    return str(document["summary"])


class ChatSummarizer(ChatClient):
    """Asks the extraction model for a session's summary."""

    async def summarize(self, given: SummaryInput) -> str:
        lines = "\n".join(f"- {' '.join(text.split())}" for text in (*given.explicit, *given.others))
        return parse_summary(await self.ask(SYSTEM_PROMPT, lines, "session_summary", SUMMARY_SCHEMA, probe=PROBE))


async def summary_of(summarizer: ChatSummarizer | None, given: SummaryInput, pii: str) -> str:
    """The summary of ``given`` ('' for none): the model's if it answers with one that may be
    stored, else the extractive one."""
    if not given:
        return ""
    if summarizer is not None:
        try:
            kept = acceptable(within_limit(await summarizer.summarize(given)), pii)
        except ExtractionError as exc:  # down, refused, not what was asked: the session still ends
            _log.warning("session summary: the model did not give one (%s); taken from the memories", exc)
        else:
            if kept:
                return kept
            _log.warning("session summary: the model's summary may not be stored; taken from the memories")
    return extractive(given, pii)


def summarizer(config: Any) -> ChatSummarizer | None:
    """The summarizer on the configured extraction model; None without one. It waits for an
    answer at most as long as an extraction does, and 20 s at most: EndSession waits for it."""
    if not config.extraction_configured:
        return None
    return ChatSummarizer(config.extraction_url, config.extraction_model, config.extraction_api_key,
                          min(config.extraction_timeout_seconds, 20.0), output=config.extraction_output,
                          max_tokens=256, threads=2)
