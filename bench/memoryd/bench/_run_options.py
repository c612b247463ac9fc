"""The options the ``memoryd bench`` commands that run memoryd share, declared once: which server
to call and with what token (``add_server_options``; ``_cli.bench_token`` reads them), and how a
run starts its embedded server and reports (``add_run_options``)."""

from __future__ import annotations

import argparse
import os

START_TIMEOUT_HELP = "seconds to wait for the embedded server to listen (default 180)"


def add_server_options(parser: argparse.ArgumentParser, token_file: str) -> None:
    """``--addr``, and the bearer token used with it (``--token``, else ``--token-file``)."""
    parser.add_argument("--addr", help="use the memoryd already running here instead of starting one")
    parser.add_argument("--token", default=os.environ.get("MEMORYD_TOKEN", ""),
                        help="bearer token for --addr (default: $MEMORYD_TOKEN, then --token-file)")
    parser.add_argument("--token-file", default=token_file, help=f"default: {token_file}")


def add_run_options(parser: argparse.ArgumentParser, *, json_help: str = "also write the results as JSON",
                    json_metavar: str = "OUT", start_help: str = START_TIMEOUT_HELP,
                    progress_help: str | None = "no progress bars on stderr") -> None:
    """``--start-timeout``, ``--json`` and ``--no-progress`` (left out when ``progress_help`` is
    None). The help texts are each command's own words for what it starts and writes."""
    parser.add_argument("--start-timeout", type=float, default=180.0, help=start_help)
    parser.add_argument("--json", metavar=json_metavar, help=json_help)
    if progress_help is not None:
        parser.add_argument("--no-progress", action="store_true", help=progress_help)
