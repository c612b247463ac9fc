"""BM25 ranking of the keyword channel, in one SQL statement under the read filter, and the
collection statistics it scores with, kept by the writes (``keyword_stats``, migration 0017).

Terms are written as keyed hashes by ``_keywords``; a search hashes the query's terms the
same way and ranks the memories whose postings hold them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg import sql
from psycopg.rows import tuple_row

from memoryd.domain import Category, KeywordHit, ReadFilter

from .._filters import Tenanted, labels_of, read_conditions, visibility_conditions
from ._keywords import TermHasher, tokenize
from ..postgres import TenantConn

# BM25 parameters: Anserini's defaults for short passages. Memories are short; on LoCoMo
# (bench/RESULTS.md) these beat the Lucene defaults (1.2, 0.75) by about one point of recall@10.
K1 = 0.9
B = 0.4

# A subject's kept counts are folded once it has more than this many rows (a Write adds two
# per new item: its insert, then its length): a keyword search sums at most about this many.
FOLD_AT = 64

# Folding: a group's rows of changes become one row (none if they sum to nothing). Rows are
# taken with SKIP LOCKED, so two folds never wait for each other (each folds what it took)
# and rows that writers have not committed yet are not seen: they wait for the next fold.
_FOLD = """
WITH gone AS (
    DELETE FROM keyword_stats WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM keyword_stats WHERE tenant_id = %(tenant)s AND subject IN (
            SELECT subject FROM keyword_stats WHERE tenant_id = %(tenant)s {owners}
            GROUP BY subject HAVING {due})
        FOR UPDATE SKIP LOCKED))
    RETURNING subject, scope, session_id, category, docs, length),
folded AS (
    INSERT INTO keyword_stats (tenant_id, subject, scope, session_id, category, docs, length)
    SELECT %(tenant)s, subject, scope, session_id, category, sum(docs), sum(length) FROM gone
    GROUP BY subject, scope, session_id, category HAVING sum(docs) <> 0 OR sum(length) <> 0
    RETURNING 1)
SELECT (SELECT count(*) FROM gone) - (SELECT count(*) FROM folded) AS removed"""
_FOLD_TENANT = _FOLD.format(
    owners="", due="count(*) > count(DISTINCT (scope, session_id, category)) OR bool_or(docs = 0 AND length = 0)")
_FOLD_OWNERS = _FOLD.format(owners="AND subject = ANY(%(owners)s)", due=f"count(*) > {FOLD_AT}")


async def fold_stats(conn: TenantConn) -> int:
    """Fold the tenant's kept BM25 counts (``keyword_stats``: rows of changes, appended by the
    writes) into one row per group, dropping groups left with nothing; return how many rows
    went (the lifecycle sweep)."""
    cur = await conn.execute(_FOLD_TENANT, {"tenant": conn.tenant})
    row = await cur.fetchone()
    return int(row["removed"]) if row else 0


async def fold_owners_stats(conn: TenantConn, owners: Sequence[str]) -> None:
    """Fold the kept counts of ``owners`` (subjects, '' for the organisation) that have more
    than FOLD_AT rows, in the caller's transaction (a Write's, as its last statement: sent,
    not waited for)."""
    await conn.execute(_FOLD_OWNERS, {"tenant": conn.tenant, "owners": sorted(set(owners))})


# FILTER FIRST: a memory counts only if it passes the shared read WHERE clause and is active
# and unexpired. N and avgdl are over every such memory (`stats`), df over the hits among
# them, and only they can match; so neither what the caller may not read nor forgotten or
# expired memories influence the scores of what it may. `memories` columns stay unqualified
# because read_conditions names them bare (inside each subquery they resolve to `memories`).
#
# The plan must not depend on the tenant's size being known: the postings of the query's terms
# drive (`hits`), and each posting's memory is checked by primary key in a LATERAL subquery
# (LIMIT 1 keeps it from being flattened into a join the planner could reorder). The older form
# joined the postings to a materialised CTE of every eligible memory; under a generic plan
# (psycopg prepares a statement after a few executions) that became a nested loop over the
# CTE: 7.5 s instead of 0.1 s for a tenant of 100,000 memories (bench/RESULTS.md). A plain
# join, planned with the real parameters, hashes the subject's memories for a common word
# (250 instead of 650 ms on a subject of 100,000 where the word is in most memories) but,
# on tables not yet analysed, scanned the subject once per posting: 86 ms instead of 3 ms
# on a LoCoMo conversation (bench/RESULTS.md, issue 14). Robust wins.
# Placeholders are positional: the stats' own, then query terms, their frequencies, the WHERE
# clause's (liveness at now included), tenant, owners, query terms, limit.
_BM25 = sql.SQL(f"""
WITH totals AS MATERIALIZED ({{totals}}),
stats AS (
    SELECT n, CASE WHEN n > 0 AND len > 0 THEN len / n ELSE 1 END AS avgdl FROM totals
),
query AS (
    SELECT q.term, q.qtf FROM unnest(%s::bigint[], %s::integer[]) AS q(term, qtf)
),
hits AS MATERIALIZED (
    SELECT t.memory_id, t.term, t.tf, m.doc_len
    FROM memory_terms t
    CROSS JOIN LATERAL (
        SELECT doc_len FROM memories WHERE {{live}} AND id = t.memory_id LIMIT 1
    ) m
    WHERE t.tenant_id = %s AND t.subject = ANY(%s) AND t.term = ANY(%s::bigint[])
),
idf AS (
    SELECT h.term, ln(1 + (s.n - count(*)::float8 + 0.5) / (count(*)::float8 + 0.5)) AS idf
    FROM hits h CROSS JOIN stats s GROUP BY h.term, s.n
),
weight AS (
    SELECT sum(q.qtf * COALESCE(i.idf, ln(1 + (s.n + 0.5) / 0.5))) AS total
    FROM query q LEFT JOIN idf i USING (term) CROSS JOIN stats s
),
scored AS (
    SELECT h.memory_id,
           sum(q.qtf * i.idf * h.tf * ({K1} + 1) / (h.tf + {K1} * (1 - {B} + {B} * h.doc_len::float8 / s.avgdl)))
               AS score
    FROM hits h JOIN idf i USING (term) JOIN query q USING (term) CROSS JOIN stats s
    GROUP BY h.memory_id
)
SELECT c.memory_id::text AS memory_id, c.score,
       CASE WHEN w.total > 0 THEN least(1.0, c.score / w.total) ELSE 0 END AS relevance
FROM scored c CROSS JOIN weight w
ORDER BY c.score DESC, c.memory_id
LIMIT %s
""")

# N and the summed length (`totals`: n, len as float8) counted over every memory the read may
# see: a scan of them, for reads that narrow by keys, tags or time (few rows, or no kept count
# fits them).
_SCANNED = sql.SQL("""
SELECT count(*)::float8 AS n, COALESCE(sum(doc_len), 0)::float8 AS len FROM memories
WHERE {live}""")

# The same totals from what the writes keep (``keyword_stats``, migration 0017), for reads
# that see whole categories of some owners and sessions — every Recall by meaning: the kept
# counts of the categories a `*` rule opens (`_WHOLE`), less their memories whose validity or
# TTL has lapsed (`_LAPSED`, through index memories_lapsing), plus the memories of categories
# opened only for some keys, counted directly (`_SOME`, through memories_by_key: a view names
# few keys). Exactly the scan's numbers (tests/storage/test_keyword_stats.py).
_WHOLE = sql.SQL("""
SELECT sum(docs) AS n, sum(length) AS len FROM keyword_stats
WHERE tenant_id = %s AND {seen} AND category = ANY(%s)""")
_LAPSED = sql.SQL("""
SELECT -count(*) AS n, -sum(doc_len) AS len FROM memories
WHERE {where} AND subject = ANY(%s) AND category = ANY(%s) AND status = 'active'
  AND (expires_at IS NOT NULL OR valid_until IS NOT NULL) AND LEAST(expires_at, valid_until) <= %s""")
_SOME = sql.SQL("""
SELECT count(*) AS n, sum(doc_len) AS len FROM memories
WHERE {live} AND subject = ANY(%s) AND category = ANY(%s) AND key_label = ANY(%b) AND key_label <> '\\x'""")
_SUMMED = sql.SQL("SELECT COALESCE(sum(n), 0)::float8 AS n, COALESCE(sum(len), 0)::float8 AS len FROM ({}) AS parts")


def _totals(scope: Tenanted, flt: ReadFilter, owners: list[str], now: datetime,
            kept: bool) -> tuple[sql.Composable, list[Any]]:
    """The ``totals`` subquery of a keyword search and its parameters — from the kept counts
    when ``kept`` and the read fits them (whole categories), else by a scan."""
    live, live_params = read_conditions(scope, flt, live_at=now)
    if not kept or flt.keys or flt.tags or flt.updated_after is not None or flt.updated_before is not None:
        return _SCANNED.format(live=live), live_params
    where, params = read_conditions(scope, flt)
    rules = labels_of(flt).rules
    wanted = {c.value for c in flt.categories or Category}
    whole = sorted({c.value for c, labels in rules if labels is None} & wanted)
    some = [(c.value, labels) for c, labels in rules if labels and c.value in wanted and c.value not in whole]
    parts: list[sql.Composable] = [sql.SQL("SELECT 0 AS n, 0 AS len")]
    values: list[Any] = []
    if whole:
        seen, seen_params = visibility_conditions(flt)
        parts += [_WHOLE.format(seen=sql.SQL(" AND ").join(seen)), _LAPSED.format(where=where)]
        values += [scope.tenant, *seen_params, whole, *params, owners, whole, now]
    if some:
        parts.append(_SOME.format(live=live))
        values += [*live_params, owners, sorted({c for c, _ in some}),
                   sorted({bytes.fromhex(label) for _, labels in some for label in labels})]
    return _SUMMED.format(sql.SQL(" UNION ALL ").join(parts)), values


def bm25_statement(
    scope: Tenanted, flt: ReadFilter, terms: Counter[int], limit: int, now: datetime, *, kept: bool = True
) -> tuple[sql.Composed, list[Any]]:
    """The one SQL statement of a keyword search and its parameters (bench/keyword_probe.py
    EXPLAINs it). ``kept=False`` counts N and avgdl by a scan even where kept counts fit: the
    reference the tests hold the kept counts to."""
    live, params = read_conditions(scope, flt, live_at=now)
    # The postings index narrows to the subject's (and, if asked for, the organisation's) rows;
    # the LATERAL check on each memory alone decides what may match.
    owners = [flt.subject, ""] if flt.include_org else [flt.subject]
    hashes = list(terms)
    totals, totals_params = _totals(scope, flt, owners, now, kept)
    return _BM25.format(totals=totals, live=live), [*totals_params, hashes, list(terms.values()),
                                                     *params, scope.tenant, owners, hashes, limit]


async def keyword_search(
    conn: TenantConn,
    flt: ReadFilter,
    query: str,
    hasher: TermHasher,
    limit: int,
    now: datetime,
    *,
    kept: bool = True,
) -> list[KeywordHit]:
    """The memories matching ``query``'s terms, best BM25 score first.

    A word repeated in the query weighs more (its idf counts once per repeat). A query with
    no terms left after tokenising (empty, punctuation, only stopwords) matches nothing.
    A hit's ``relevance`` is its score over the query's whole term weight (the sum of its
    terms' idf, a term no readable memory holds at the highest idf), capped at 1: about the
    share of the query a memory of average length matches once each — comparable between
    queries, unlike the score. ``kept``: as ``bm25_statement``.
    """
    terms = hasher.counts(tokenize(query))
    if not terms or limit <= 0:
        return []
    statement, params = bm25_statement(conn, flt, terms, limit, now, kept=kept)
    async with conn.cursor(row_factory=tuple_row) as cur:
        # Never a prepared statement: a plan made for one tenant's size must not serve another's.
        await cur.execute(statement, params, prepare=False)
        return [KeywordHit(memory_id, float(score), float(relevance))
                for memory_id, score, relevance in await cur.fetchall()]
