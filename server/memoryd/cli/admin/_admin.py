"""Operator commands: serve, migrate, token issue (its parser and the call through a server are
in ``_token_issue``, token revoke in ``_keys``)."""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import stat
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryd.domain import MemorydError

from .._data_dir import hold_data_dir
from .._errors import CliError, report
from ._keys import add_token_revoke
from ._processes import ParentChannel, child_command, serve_processes
from ._settings import SERVE_SETTINGS, SettingsHelp
from ..client import add_token_issue, print_token

if TYPE_CHECKING:
    from memoryd.server import StartedServer


def add_admin_commands(commands: Any) -> None:
    serve = commands.add_parser("serve", help="run the server (an embedded PostgreSQL unless a MEMORYD_POSTGRES_*DSN "
                                              "is set, Milvus Lite unless MEMORYD_MILVUS_URI is)",
                                description="Run the server until SIGTERM or Ctrl-C. With no settings it runs an "
                                            "embedded PostgreSQL and Milvus Lite under .memoryd and writes demo "
                                            "tokens there.", add_help=False)
    serve.add_argument("-h", "--help", action=SettingsHelp, settings=SERVE_SETTINGS)
    serve.add_argument("--addr", metavar="HOST:PORT",
                       help="listen here (default: $MEMORYD_ADDR, else the configuration's addr; see below)")
    serve.add_argument("--processes", type=int, metavar="N",
                       help="serve from N processes sharing the address, one per core; only with a PostgreSQL "
                            "server and a Milvus server (default: $MEMORYD_PROCESSES, else the configuration's "
                            "processes, else 1)")
    serve.set_defaults(run=_serve)

    mig = commands.add_parser("migrate", help="apply database migrations and exit (the owner's login)")
    mig.add_argument("--app-password-file", default=os.environ.get("MEMORYD_POSTGRES_APP_PASSWORD_FILE", ""),
                     help="set memoryd_app's login password from this file (default: "
                          "$MEMORYD_POSTGRES_APP_PASSWORD_FILE; none: left as it is)")
    mig.add_argument("--worker-password-file", default=os.environ.get("MEMORYD_POSTGRES_WORKER_PASSWORD_FILE", ""),
                     help="set memoryd_worker's login password from this file (default: "
                          "$MEMORYD_POSTGRES_WORKER_PASSWORD_FILE; none: left as it is)")
    mig.set_defaults(run=_migrate)

    token = commands.add_parser("token", help="credentials: issue and revoke bearer tokens")
    token_commands = token.add_subparsers(dest="token_command", required=True, metavar="COMMAND")
    add_token_issue(token_commands, locally=_token_issue)
    add_token_revoke(token_commands)


def _print_started(started: StartedServer, config_addr: str, data_dir: str, embedded: bool) -> None:
    host = config_addr.rsplit(":", 1)[0]
    if embedded:
        print(f"embedded PostgreSQL, Milvus Lite and keys under {data_dir}", flush=True)
    for path in started.token_files:
        print(f"token: {path}", flush=True)
    # Last, so whoever waits for this line has everything above too.
    print(f"memoryd listening on {host}:{started.port}", flush=True)


def keep_private(data_dir: Path) -> None:
    """Everything memoryd creates from now on is its owner's alone (0600 files, 0700 folders),
    and what an earlier run (or an older memoryd) left readable under ``data_dir`` loses its
    group and other bits: Milvus Lite's segments hold ids, subjects, keys, tags and
    embeddings, which a purge removes — another local user must not copy them first."""
    os.umask(0o077)
    if not data_dir.is_dir():
        return
    for folder, dirs, files in os.walk(data_dir):
        for path in [folder, *(os.path.join(folder, name) for name in (*dirs, *files))]:
            try:
                mode = os.lstat(path).st_mode
                if not stat.S_ISLNK(mode) and mode & 0o077:
                    os.chmod(path, stat.S_IMODE(mode) & ~0o077)
            except OSError:
                pass  # gone meanwhile, or not ours to change


async def _serve(args: argparse.Namespace) -> int:
    from memoryd.server import Memoryd, StartedServer, load

    config = load(args.config)
    if args.addr is not None:  # over the variable and the file, as --addr is in every other command
        config = replace(config, addr=args.addr)
    if args.processes is not None:
        config = replace(config, processes=args.processes)  # checked as the configuration is
    if config.processes > 1:
        return await serve_processes(config, child_command(args), lambda port: _print_started(
            StartedServer(port, ()), config.addr, str(config.data_dir), embedded=False))
    # `kill -USR1 <pid>` prints every thread's stack to stderr: how to see what a stuck
    # server is waiting for.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    parent = ParentChannel.of_this_process()  # a child of `serve --processes`
    lock = None
    if config.embedded or not config.milvus_uri:  # it runs an embedded part (``_data_dir``)
        try:
            lock = hold_data_dir(config, "serve", "stop that one first, or give this one a data directory of its own "
                                                  "(MEMORYD_DATA_DIR)")
        except CliError as exc:
            report(exc.message, exc.hint)
            return 1
    # Only once the data directory is this process's: a refused second `serve` must change
    # nothing in it — run as root, the first one's PostgreSQL runs as a user of its own, which
    # must go on reaching its folder there (or its clean stop fails).
    keep_private(config.data_dir)
    app = Memoryd(config, shares_port=parent is not None)
    if parent is not None:
        parent.watch()
    try:
        await app.serve_until_signalled(
            (lambda started: parent.listening(started.port)) if parent is not None else
            (lambda started: _print_started(started, config.addr, str(config.data_dir), config.embedded))
        )
    except MemorydError as exc:
        print(f"memoryd: error: {exc.message}", file=sys.stderr)
        return 1
    finally:
        if lock is not None:
            lock.close()
    return 0


def _login_passwords(args: argparse.Namespace) -> dict[str, str]:
    passwords = {}
    for role, path in (("memoryd_app", args.app_password_file), ("memoryd_worker", args.worker_password_file)):
        if path:
            password = Path(path).read_text().strip()
            if not password:
                raise CliError(f"{path} is empty: {role} needs a password")
            passwords[role] = password
    return passwords


async def _migrate(args: argparse.Namespace) -> int:
    from memoryd.server import load
    from memoryd.storage import EmbeddedPostgres, migrate, set_login_passwords

    config = load(args.config)
    passwords = _login_passwords(args)
    embedded = None
    dsn = config.postgres_dsn
    if config.embedded:
        embedded = EmbeddedPostgres(config.data_dir)
        embedded.start()
        dsn = embedded.owner_dsn
    elif not dsn:
        raise CliError("'memoryd migrate' runs as the database owner: set MEMORYD_POSTGRES_DSN to the owner's login")
    try:
        applied = await migrate(dsn)
        if passwords:
            await set_login_passwords(dsn, passwords)
    except MemorydError as exc:
        print(f"memoryd: error: {exc.message}", file=sys.stderr)
        return 1
    finally:
        if embedded is not None:
            embedded.stop()
    for migration in applied:
        print(f"applied {migration.version:04d}_{migration.name}")
    if not applied:
        print("schema is up to date")
    for role in passwords:
        print(f"set the login password of {role}")
    return 0


def _token_issue(args: argparse.Namespace) -> int:
    """``token issue --tenant``: sign here with the configuration's signing key file."""
    from memoryd.server import KeyFiles, issue_token, load, load_secrets, parse_ttl

    config = load(args.config)
    key = load_secrets(KeyFiles.of(config)).signing_key
    roles = tuple(dict.fromkeys(args.role or ["agent"]))
    print_token(issue_token(key, tenant=args.tenant, agent=args.agent, roles=roles, subject=args.subject,
                            ttl_seconds=parse_ttl(args.ttl or "1h")), as_json=args.json)
    return 0
