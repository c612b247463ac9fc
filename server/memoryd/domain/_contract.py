"""The contract's fixed limits and identifier grammars, written once.

They are fixed, not configuration: the vector index's collections are made with them (the
VARCHAR lengths of tenant, subject, key and session, the tags array's capacity and element
length), tokens carry names that must fit them, and a turn id becomes a tag of the memories
made from it. Validation refuses anything longer, normalisation and extraction cut to them,
and the configurable request limits (``memoryd.server.Limits``) must stay within them —
``Config`` refuses one that does not. ``tests/domain/test_contract_limits.py`` checks the
proto comments and the Milvus schema against these values.

Identifiers are ASCII, so their characters are their bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CONTRACT", "ContractLimits", "Grammar"]


@dataclass(frozen=True)
class Grammar:
    """What one kind of identifier may be: its characters and its length."""

    pattern: re.Pattern[str]
    max_bytes: int
    characters: str  # in words, for error messages: "letters, digits and ._-"

    def fits(self, value: str) -> bool:
        return len(value.encode()) <= self.max_bytes and self.pattern.fullmatch(value) is not None

    @property
    def words(self) -> str:
        """E.g. "letters, digits and ._- (starting with a letter or digit)"."""
        first = " (starting with a letter or digit)" if self.pattern.pattern.startswith("[A-Za-z0-9]") else ""
        return f"{self.characters}{first}"

    def described(self, max_bytes: int | None = None) -> str:
        """E.g. "1-64 letters, digits and ._- (starting with a letter or digit)"."""
        return f"1-{max_bytes or self.max_bytes} {self.words}"


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_TOKENISH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]*")


@dataclass(frozen=True)
class ContractLimits:
    tenant: Grammar = Grammar(_NAME, 64, "letters, digits and ._-")
    agent: Grammar = Grammar(_NAME, 64, "letters, digits and ._-")
    subject: Grammar = Grammar(re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]*"), 128, "letters, digits and ._:@-")
    key: Grammar = Grammar(re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]*"), 128, "letters, digits and ._:/-")
    session_id: Grammar = Grammar(_TOKENISH, 128, "letters, digits and ._:@/-")
    source_turn_id: Grammar = Grammar(_TOKENISH, 128, "letters, digits and ._:@/-")
    # A turn id becomes a tag of the memories made from its turn: no longer than a tag.
    turn_id: Grammar = Grammar(_TOKENISH, 64, "letters, digits and ._:@/-")
    token_id: Grammar = Grammar(re.compile(r"[A-Za-z0-9_-]+"), 64, "letters, digits, _ and -")
    speaker_bytes: int = 64
    idempotency_key_bytes: int = 128
    memory_id_chars: int = 36  # a UUID's canonical text
    tags: int = 32
    tag_bytes: int = 64


CONTRACT = ContractLimits()
