"""What a recall from a conversation searches with (issue 40).

An agent rarely has a clean question: it has the running conversation — the request's
``context`` turns, or the dialogue pasted into ``query`` as ``speaker: text`` lines (most
integrations do that; ``spoken`` reads them). Embedding the whole dialogue as one text is slow
(the embedder's time grows with the text: ~0.35 ms a Latin character on one core here) and
blurs what the talk is about now. Measured on MADial-Bench (bench/RESULTS.md, issue 40), the
user's own words find the memory the assistant should bring up better than the whole dialogue,
the latest ones best, and the assistant's turns in the keywords cost recall.

So a conversation becomes a ``Search``:

- ``meaning`` — what the dense channel embeds: the focus (the latest user turn, or the query
  when the request has one beside a context), then the user's turns before it, newest first,
  until MEANING_COST (``_cost``: ~75 tokens). The earlier turns say what "it", "there" and "her
  teacher" are; newest first, so what is cut is the oldest. Bounded whatever the context's
  length: a long conversation costs what a short one does. The focus is embedded on its own
  as well and the dense channel searches with the sum of the two unit vectors: with the
  earlier turns taken from another MADial dialogue (a change of topic), the meaning alone fell
  to English R@5 0.34 against 0.50 for the focus alone, the sum kept 0.49; on MADial itself
  the sum costs ~2 points and one more short embedding (bench/RESULTS.md).
- ``words`` — what the keyword channel reads: the focus, then the user's turns, newest first,
  until WORDS_COST;
- ``names`` — what the entity lookup reads (``_recall``: a memory tagged ``entity:lyon`` for a
  name the text says): ``words`` after the assistant's turn the focus answers ("Do you remember
  Lyon?" — "Yes! What was the hotel?"). Only names that memories carry as tags count, so its
  filler costs nothing here; in the keywords it cost MADial recall (bench/RESULTS.md).

A conversation's relevance is judged on a scale of its own (``_relevance``), and its dense
channel weighs more in the fusion (``_recall``). What the context holds changes only what is
searched for: every channel still searches the caller's view-narrowed filter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memoryd.domain import Turn

# The dense channel's text: the focus and the user turns before it, newest first, at most
# this cost (``_cost``: about four times the tokens). On MADial (bench/RESULTS.md, issue 40),
# 120 / 180 / 240 / 300 / 400 gave English R@5 0.531 / 0.598 / 0.609 / 0.625 / 0.625 and
# Chinese 0.534 / 0.533 / 0.547 / 0.557 / 0.553, at a higher latency each step.
MEANING_COST = 300
# A cut turn shorter than this is left out (a few words say nothing).
SHORTEST = 24
# The keyword channel's text, the same way.
WORDS_COST = 2000
# A query is read as a dialogue when it has at least this many ``speaker: text`` lines and
# they are most of its non-empty lines.
DIALOGUE_LINES = 2

# Who is the assistant: the speaker names agents and chat transcripts use for it.
ASSISTANT_SPEAKERS = frozenset({
    "assistant", "ai", "bot", "agent", "model", "system", "gpt", "chatgpt", "claude", "llm", "copilot",
    "助手", "助理", "机器人", "客服", "系统",
})
# ``speaker: text`` (``<Speaker>: "text"`` as MADial writes it, full-width colons too).
_LINE = re.compile(r"^\s*[<\[]?\s*([^\s<>\[\]:：][^<>\[\]:：\n]{0,39}?)\s*[>\]]?\s*[:：]\s*(.*)$")
# Markers around a transcript's body, e.g. ``<BOD>``, ``<EOD>``, ``---``.
_MARKER = re.compile(r"^\s*(<[A-Za-z_/]{1,12}>|[-=*#]{3,})\s*$")
_QUOTES = "\"'“”‘’「」『』"
_WIDE = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


@dataclass(frozen=True)
class Search:
    """What the channels search with: ``meaning`` for the dense one, ``words`` for the
    keyword channel, ``names`` for the entity lookup."""

    meaning: str
    words: str
    names: str
    focus: str = ""  # embedded on its own too, when it is not the whole meaning
    conversation: bool = True

    def __post_init__(self) -> None:
        if not self.focus:
            object.__setattr__(self, "focus", self.meaning)

    @classmethod
    def of_query(cls, query: str) -> Search:
        return cls(query, query, query, conversation=False)


def spoken(query: str) -> list[tuple[str, str]] | None:
    """The (speaker, text) turns of a dialogue-shaped query, or None for any other text.

    A line that does not start with a speaker continues the turn before it; markers such as
    ``<BOD>`` are skipped. A question with a colon in it ("Note: what did Ana say?") is one
    line, not a dialogue.
    """
    turns: list[tuple[str, str]] = []
    plain = 0
    for line in query.splitlines():
        if not line.strip() or _MARKER.match(line):
            continue
        match = _LINE.match(line)
        if match and len(match.group(1).split()) <= 4:
            turns.append((match.group(1).strip(), _unquoted(match.group(2))))
        elif turns:
            speaker, text = turns[-1]
            turns[-1] = (speaker, f"{text} {_unquoted(line)}".strip())
        else:
            plain += 1
    if len(turns) < DIALOGUE_LINES or plain > len(turns) or len({s.casefold() for s, _ in turns}) < 2:
        return None
    return [(s, t) for s, t in turns if t]


def search_for(query: str, context: Sequence[Turn] = ()) -> Search:
    """What to search with for a request's ``query`` and ``context`` (most recent turn last)."""
    turns = [(t.speaker, t.text) for t in context]
    focus = query.strip()
    if not turns:
        dialogue = spoken(query) if "\n" in query else None
        if dialogue is None:
            return Search.of_query(query)
        turns, focus = dialogue, ""
    if not focus:  # the latest user turn, or the assistant's when only it spoke
        at = next((i for i in range(len(turns) - 1, -1, -1) if not is_assistant(turns[i][0])), len(turns) - 1)
        focus, turns = turns[at][1], turns[:at]
    users = [text for speaker, text in reversed(turns) if not is_assistant(speaker)]
    # The assistant's turn just before the focus is what it answers ("Yes, that one!").
    replied = [turns[-1][1]] if turns and is_assistant(turns[-1][0]) else []
    words = _newest_first([focus, *users], WORDS_COST)
    return Search(_newest_first([focus, *users], MEANING_COST), words,
                  "\n".join([words, *replied]) if replied else words, _newest_first([focus], MEANING_COST))


def is_assistant(speaker: str) -> bool:
    return speaker.strip().strip("<>[]").casefold() in ASSISTANT_SPEAKERS


def _newest_first(texts: list[str], budget: int) -> str:
    """``texts`` in order, the one that does not fit cut to what is left of ``budget`` (unless
    too little is left to say anything: SHORTEST)."""
    out: list[str] = []
    left = budget
    for text in (t.strip() for t in texts):
        if not text:
            continue
        part = _cut(text, left)
        if part.strip() and (part == text or not out or _cost(part) >= SHORTEST):
            out.append(part)
        left -= _cost(part) + 1
        if part != text or left <= 0:
            break
    return "\n".join(out)


def _cost(text: str) -> int:
    """About four times the text's tokens (what the embedder's time grows with): a Latin
    character is about a quarter of a token, a CJK one most of a token."""
    return len(text) + 2 * len(_WIDE.findall(text))


def _cut(text: str, budget: int) -> str:
    """The start of ``text`` that costs at most ``budget``, ended at a word where it has words."""
    used = 0
    for i, ch in enumerate(text):
        used += 3 if _WIDE.match(ch) else 1
        if used > budget:
            space = text.rfind(" ", 0, i + 1)
            return text[:space] if space > 0 and not _WIDE.match(text[i]) else text[:i]
    return text


def _unquoted(text: str) -> str:
    return text.strip().strip(_QUOTES).strip()
