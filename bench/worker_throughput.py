"""How fast one `memoryd worker` indexes a backlog on a Milvus server (issue 13, bug 9).

Starts the distributed shape of tests/support_distributed.py (Debian's PostgreSQL, the
Milvus 2.3.5 standalone server of `scripts/install-test-servers.sh`), writes MEMORIES memories
spread over TENANTS tenants through one replica with no worker running, then starts one
`memoryd worker` and times the drain of the outbox. Also counts the Query requests Milvus
served meanwhile (its own Prometheus metrics), i.e. the read-backs.

    .venv/bin/python bench/worker_throughput.py --tenants 50 --memories 600
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import grpc
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import Agent, draft, full_view, put_view, token_for  # noqa: E402
from tests.support_distributed import Deployment, ExternalPostgres, MilvusStandalone  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=50)
    parser.add_argument("--memories", type=int, default=600)
    args = parser.parse_args()
    pg, milvus = ExternalPostgres().start(), MilvusStandalone().start()
    root = Path(tempfile.mkdtemp(prefix="memoryd-bench-worker-"))
    try:
        owner = pg.create_owner_database("bench")
        (root / "keys").mkdir(mode=0o700)
        shape = Deployment(pg, milvus, owner, root / "keys", root)
        assert shape.migrate().returncode == 0
        replica = shape.start_replica()
        signing = shape.keys / "signing.pem"
        with grpc.insecure_channel(replica.target) as channel:
            agents = []
            for t in range(args.tenants):
                put_view(channel, signing, f"bench-{t}", full_view("agent-1"))
                agents.append(Agent(channel, token_for(signing, f"bench-{t}")))
            for n in range(args.memories):
                agents[n % args.tenants].write("alice", draft("event", f"note {n} about topic {n % 17}"))
        with psycopg.connect(shape.worker_dsn) as conn:
            backlog = conn.execute("SELECT count(*) FROM outbox").fetchone()[0]
        before = milvus.queries()
        started = time.monotonic()
        shape.start_worker()
        with psycopg.connect(shape.worker_dsn, autocommit=True) as conn:
            while conn.execute("SELECT count(*) FROM outbox").fetchone()[0]:
                time.sleep(0.2)
        elapsed = time.monotonic() - started
        queries = milvus.queries() - before
        load = os.getloadavg()[0]
        print(f"backlog {backlog} rows over {args.tenants} tenants: drained in {elapsed:.1f} s "
              f"({backlog / elapsed:.1f} rows/s incl. worker start), {queries:.0f} Milvus queries; load {load:.2f}")
        shape.stop_all()
    finally:
        milvus.destroy()
        pg.destroy()


if __name__ == "__main__":
    main()
