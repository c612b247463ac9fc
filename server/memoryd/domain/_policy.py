"""Tenant policy: the rules of the write pipeline and the memory lifecycle, per tenant.

The configuration's ``[policy]`` table sets the default for every tenant and
``[policy.tenants.<tenant>]`` overrides parts of it for one tenant (see
``memoryd.server._config``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from ._model import Category, SourceKind

# The default minimum relevance of a Recall (bench/RESULTS.md, issue 15: how it was chosen).
MIN_RELEVANCE = 0.3


def _default_ttl_days() -> dict[Category, float | None]:
    # How long a memory of each category lives after its last change; None: no TTL.
    return {
        Category.FACT: 730.0,
        Category.PREFERENCE: 180.0,
        Category.CONSTRAINT: None,
        Category.GOAL: 30.0,
        Category.CONTEXT: 7.0,
        Category.EVENT: None,
        Category.DECISION: None,
    }


def _default_trust() -> dict[SourceKind, float]:
    return {SourceKind.SYNC: 0.9, SourceKind.INPUT: 0.6, SourceKind.INFERENCE: 0.5}


@dataclass(frozen=True)
class TenantPolicy:
    # The time zone relative dates are read in, unless the subject has a `timezone` memory.
    timezone: str = "UTC"
    # Extracted items less sure than this are dropped.
    min_confidence: float = 0.7
    # Whether extracted sensitive inferences (health, emotions, finances, ...) may be kept.
    allow_sensitive: bool = False
    # What becomes of an extracted item holding an identity or financial number (resident ID,
    # passport, bank card, IBAN, social security number, phone, email: server/screen/_pii.py):
    # "drop" it, "redact" the numbers ("[passport number]") and keep the rest, or "keep" it.
    pii: str = "drop"
    ttl_days: Mapping[Category, float | None] = field(default_factory=_default_ttl_days)
    # Session-scoped memories live this long, whatever their category.
    session_ttl_hours: float = 24.0
    # An ended session's snapshot (its summary, and its session-scoped memories) lives this long.
    session_snapshot_ttl_hours: float = 24.0
    # An open session nobody wrote in for this long is ended as EndSession would; 0: never.
    session_idle_timeout_minutes: float = 30.0
    # Memories not recalled for this long, with importance below stale_importance, are forgotten.
    stale_days: float = 90.0
    stale_importance: float = 0.3
    # An extracted episodic item at least this close (cosine) to an active memory of the
    # subject merges into it. 0.95, not the 0.92 first planned: with the bundled model,
    # distinct short Chinese facts about one person measured 0.91-0.93, paraphrases 0.99+.
    merge_similarity: float = 0.95
    # At most this many active episodic memories per subject; the least valuable go first.
    episodic_cap: int = 500
    # Recall leaves out memories less relevant than this (ScoredMemory.relevance) unless the
    # request sets its own min_relevance: a query nothing answers gets an empty answer.
    min_relevance: float = MIN_RELEVANCE
    # How far each source kind is trusted; a lower-trust value never silently replaces a
    # higher-trust one.
    trust: Mapping[SourceKind, float] = field(default_factory=_default_trust)

    def ttl(self, category: Category, *, session: bool = False) -> timedelta | None:
        """The time to live of a new or changed memory; None: it does not expire."""
        if session:
            return timedelta(hours=self.session_ttl_hours)
        days = self.ttl_days.get(category)
        return None if days is None else timedelta(days=days)

    def trust_of(self, kind: SourceKind) -> float:
        return self.trust.get(kind, 0.5)
