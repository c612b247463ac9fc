"""Which entity tags a query will be found to name, guessed before the store answers, so that
Recall's query embedding can start at once instead of after the entity lookup.

Recall embeds the query without the names of entities the caller's memories are tagged with
(``_recall.Recaller._then_dense``): which those are is a store read (``named_entities``, ~4 ms,
and more on a large subject), which used to sit before the embedding on every free-text
Recall's critical path. The guess is what the
same lookup found the last time for the same tenant and read filter; the embedding of the text
the guess gives starts beside the lookup, and is used only if the lookup's tags give that same
text — otherwise the right text is embedded after all. So a guess changes how soon an
answer comes, never what it is: the answer always rests on the exact lookup.

What is remembered is what earlier lookups returned for that exact filter (the guard's,
narrowed by the caller's view): nothing a caller with that filter could not read itself.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from memoryd.domain import ReadFilter

# (tenant, filter) pairs remembered; the least recently used goes first. A pair holds the tags
# found for it, at most MAX_TAGS (the most recent ones).
MAX_FILTERS = 4096
MAX_TAGS = 64


class EntityGuesses:
    """The entity tags found for each (tenant, read filter), most recent lookups winning."""

    def __init__(self, max_filters: int = MAX_FILTERS) -> None:
        self._max = max_filters
        self._found: OrderedDict[tuple[str, ReadFilter], tuple[str, ...]] = OrderedDict()

    def guess(self, tenant: str, flt: ReadFilter, proposed: Iterable[str]) -> frozenset[str]:
        """Those of ``proposed`` (the tags a query's words would give) last found for this filter."""
        known = self._found.get((tenant, flt))
        if not known:
            return frozenset()
        self._found.move_to_end((tenant, flt))
        return frozenset(proposed).intersection(known)

    def learn(self, tenant: str, flt: ReadFilter, proposed: Iterable[str], found: Iterable[str]) -> None:
        """A lookup of ``proposed`` found ``found``: remember those, forget the rest of ``proposed``."""
        key = (tenant, flt)
        asked, hit = set(proposed), list(dict.fromkeys(found))
        if not asked:
            return
        kept = [tag for tag in self._found.get(key, ()) if tag not in asked] + hit
        if kept:
            self._found[key] = tuple(kept[-MAX_TAGS:])
            self._found.move_to_end(key)
            if len(self._found) > self._max:
                self._found.popitem(last=False)
        else:
            self._found.pop(key, None)
