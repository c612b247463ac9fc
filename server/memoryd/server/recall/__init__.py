"""Recall's ranking: keyed lookups and hybrid search, the scoring formula, absolute relevance,
what a conversation searches with, and the entity guess that starts the embedding early.
"""

from ._recall import Recaller

__all__ = ["Recaller"]
