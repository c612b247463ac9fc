"""Probe: the entity look-up (``StoreSession.named_entities``) on one large subject.

Recall asks which of the ``entity:`` tags its query's words could name are carried by a
memory the caller may read. One subject of ``--memories`` memories, a quarter tagged with
one speaker's entity tag and a quarter with another's (as a conversation's turns are); then
the look-up of six proposed tags (both speakers' and four nobody carries) ``--repeats``
times; with EXPLAIN=1 in the environment, the plan PostgreSQL chose for it. Asserts nothing.

    .venv/bin/python bench/probes/entity_probe.py [--memories 20000] [--dsn OWNER_DSN]

Measured (issue 41, bench/RESULTS.md): ~28 ms at 20,000 memories, growing with the subject:
the planner joins the proposed labels to a scan of the whole subject rather than probing the
tag index (``memories_tag_labels``) label by label.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import UTC, datetime

import psycopg

from _probe_db import run_probe

from memoryd.domain import Category, Draft, ReadFilter
from memoryd.storage import LocalKeyProvider, Postgres, PostgresSettings, Stores
from memoryd.storage.keywords._keywords import TermHasher

ASKED = ["entity:ana", "entity:bo", "entity:when", "entity:did", "entity:the party", "entity:paris"]
RULES = tuple((c, ("*",)) for c in Category)


async def probe(owner_dsn: str, memories: int, repeats: int) -> None:
    db = Postgres(PostgresSettings(owner_dsn, pool_max=2))
    await db.open()
    store = Stores(db, TermHasher(b"probe-secret-0123456789abcdef"), LocalKeyProvider(os.urandom(32)))
    tenant, subject = "probe", "s"
    session = store.session(tenant, "agent")
    for start in range(0, memories, 500):
        drafts = [Draft(Category.EVENT, f"Turn {i}: we talked about the weather and the garden, note {i * 7}",
                        tags=(("entity:ana",) if i % 4 == 0 else ("entity:bo",) if i % 4 == 1 else ()))
                  for i in range(start, min(start + 500, memories))]
        await session.write(subject, drafts)
    async with await psycopg.AsyncConnection.connect(owner_dsn, autocommit=True) as owner:
        await owner.execute("ANALYZE memories")  # as autovacuum would, as the table's owner
    flt = ReadFilter(subject=subject, rules=RULES)
    found = await session.named_entities(flt, ASKED, datetime.now(UTC))
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        await session.named_entities(flt, ASKED, datetime.now(UTC))
        times.append((time.perf_counter() - began) * 1000)
    if os.environ.get("EXPLAIN"):
        from psycopg import sql

        from memoryd.storage._filters import read_conditions
        hasher = session.hasher
        labelled = await session.labelled(flt)
        async with db.tenant_tx(tenant) as conn:
            where, params = read_conditions(conn, labelled, live_at=datetime.now(UTC))
            query = sql.SQL(
                "EXPLAIN (ANALYZE, COSTS ON) SELECT label FROM unnest(%b::bytea[]) AS label WHERE EXISTS "
                "(SELECT 1 FROM memories WHERE tag_labels @> ARRAY[label] AND {where})"
            ).format(where=where)
            cur = await conn.execute(query, [[hasher.label(t) for t in ASKED], *params])
            print("\n".join(r["QUERY PLAN"] for r in await cur.fetchall()))
    print(f"{memories} memories: found {sorted(found)}; look-up p50 {statistics.median(times):.1f} ms, "
          f"max {max(times):.1f} ms over {repeats}")
    await db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--dsn", default="")
    args = parser.parse_args()
    run_probe(args.dsn, "entity-probe-", lambda dsn: probe(dsn, args.memories, args.repeats))


if __name__ == "__main__":
    main()
