"""Operator commands: serve, migrate, token issue (token revoke is in ``_keys``).

``token issue`` mints a token through a running server (TokenAdminService.IssueToken) with an
admin token, so the signing key stays on the server; the tenant is then the admin token's.
With ``--tenant`` it signs locally with the server's key file instead: how the first admin
token of a deployment is made.
"""

from __future__ import annotations

import argparse
import base64
import faulthandler
import fcntl
import json
import os
import signal
import stat
import sys
from pathlib import Path
from typing import IO, Any

import grpc
from google.protobuf import json_format
from google.protobuf.duration_pb2 import Duration

from memoryd.domain import MemorydError
from memoryd.server import Config, KeyFiles, Memoryd, StartedServer, issue_token, load, load_secrets, parse_ttl
from memoryd.storage import EmbeddedPostgres, migrate
from memoryd.v1 import token_admin_service_pb2 as token_admin
from memoryd.v1 import token_admin_service_pb2_grpc as token_admin_grpc

from ._connect import bearer, connection_options, open_channel, read_token, token_options
from ._errors import CliError, report, report_rpc_error
from ._keys import add_token_revoke


def add_admin_commands(commands: Any) -> None:
    serve = commands.add_parser("serve", help="run the server (embedded Postgres unless MEMORYD_POSTGRES_DSN is set)",
                                description="Run the server until SIGTERM or SIGINT. Configuration: --config FILE, "
                                            "MEMORYD_* variables (README, Configuration).")
    serve.set_defaults(run=_serve)

    mig = commands.add_parser("migrate", help="apply database migrations and exit")
    mig.set_defaults(run=_migrate)

    token = commands.add_parser("token", help="credentials: issue and revoke bearer tokens")
    token_commands = token.add_subparsers(dest="token_command", required=True, metavar="COMMAND")
    issue = token_commands.add_parser(
        "issue", help="print a new bearer token, minted by a server with an admin token (or, with --tenant, "
                      "signed here with the server's key file)",
        parents=[connection_options(), token_options(admin=True)],
        description="Mint a bearer token through the server at --addr (TokenAdminService.IssueToken), as the "
                    "admin token's holder: the token is for the admin's own tenant, carries only roles the admin "
                    "may grant (its own, and agent), and expires no later than the admin token; the server records "
                    "the issuance in the tenant's audit log. With --tenant, sign it here with the server's signing "
                    "key file instead (no server needed, the connection options are not used): how the first admin "
                    "token is made.")
    issue.add_argument("--agent", required=True, help="the agent the token names")
    issue.add_argument("--role", action="append", choices=["agent", "admin"],
                       help="a role the token carries (repeatable; default: agent)")
    issue.add_argument("--subject", default="", help="bind the token to one subject")
    issue.add_argument("--ttl", default=None, help="lifetime such as 15m, 1h, 7d (default: 1h; through a server "
                                                   "at most 30d and no later than the admin token's expiry)")
    issue.add_argument("--reason", default="", help="recorded with the issuance in the audit log (through a server)")
    issue.add_argument("--tenant", help="sign locally with the signing key file of the configuration, for this "
                                        "tenant, instead of asking a server (bootstrapping)")
    issue.add_argument("--json", action="store_true", help="print the token with what it grants (id, tenant, agent, "
                                                         "roles, subject, expiry) as JSON")
    issue.set_defaults(run=_token_issue)
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


def hold_data_dir(config: Config) -> IO[str] | None:
    """Take the data directory for this process if it holds state of its own (the embedded
    PostgreSQL or Milvus Lite, which one process at a time may open): a second `memoryd serve`
    on it stops here with one error line instead of a traceback from deep in Milvus Lite.
    The lock lives as long as the returned file stays open (the process's life)."""
    if not config.embedded and config.milvus_uri:
        return None
    config.data_dir.mkdir(parents=True, exist_ok=True)
    handle = open(config.data_dir / "serve.lock", "a+")  # noqa: SIM115 (held open on purpose)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip()
        handle.close()
        raise CliError(f"another memoryd is already serving {config.data_dir}" + (f" (pid {holder})" if holder else ""),
                       hint="stop that one first, or give this one a data directory of its own (MEMORYD_DATA_DIR)")
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


async def _serve(args: argparse.Namespace) -> int:
    # `kill -USR1 <pid>` prints every thread's stack to stderr: how to see what a stuck
    # server is waiting for.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    config = load(args.config)
    keep_private(config.data_dir)
    try:
        lock = hold_data_dir(config)
    except CliError as exc:
        report(exc.message, exc.hint)
        return 1
    app = Memoryd(config)
    try:
        await app.serve_until_signalled(
            lambda started: _print_started(started, config.addr, str(config.data_dir), config.embedded)
        )
    except MemorydError as exc:
        print(f"memoryd: error: {exc.message}", file=sys.stderr)
        return 1
    finally:
        if lock is not None:
            lock.close()
    return 0


async def _migrate(args: argparse.Namespace) -> int:
    config = load(args.config)
    embedded = None
    dsn = config.postgres_dsn
    if config.embedded:
        embedded = EmbeddedPostgres(config.data_dir)
        embedded.start()
        dsn = embedded.owner_dsn
    try:
        applied = await migrate(dsn)
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
    return 0


_ROLES = {"agent": token_admin.TOKEN_ROLE_AGENT, "admin": token_admin.TOKEN_ROLE_ADMIN}


def _token_issue(args: argparse.Namespace) -> int:
    if args.tenant:
        return _token_issue_locally(args)
    request = token_admin.IssueTokenRequest(agent=args.agent, roles=[_ROLES[r] for r in dict.fromkeys(args.role or [])],
                                            subject=args.subject, reason=args.reason)
    if args.ttl is not None:
        request.lifetime.CopyFrom(Duration(seconds=parse_ttl(args.ttl)))
    metadata = bearer(read_token(args, admin=True))
    with open_channel(args) as channel:
        try:
            # Never retried: a second attempt would mint (and audit) a second token.
            minted = token_admin_grpc.TokenAdminServiceStub(channel).IssueToken(request, metadata=metadata, timeout=30)
        except grpc.RpcError as error:
            report_rpc_error(error, args.addr, denied_hint=(
                "minting needs an admin token not bound to a subject (--token, MEMORYD_ADMIN_TOKEN or --token-file); "
                "the first one comes from `memoryd token issue --tenant T --agent A --role admin` where the signing "
                "key is"))
            return 1
    if args.json:
        print(json_format.MessageToJson(minted, preserving_proto_field_name=True, indent=2))
    else:
        print(minted.token)
    return 0


def _token_issue_locally(args: argparse.Namespace) -> int:
    config = load(args.config)
    key = load_secrets(KeyFiles.of(config)).signing_key
    roles = tuple(dict.fromkeys(args.role or ["agent"]))
    token = issue_token(key, tenant=args.tenant, agent=args.agent, roles=roles, subject=args.subject,
                        ttl_seconds=parse_ttl(args.ttl or "1h"))
    if args.json:  # the same shape as a server's answer
        body = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        minted = token_admin.IssueTokenResponse(token=token, token_id=claims["jti"], tenant=claims["tnt"],
                                                agent=claims["agt"], roles=[_ROLES[r] for r in claims["roles"]],
                                                subject=claims.get("sub", ""))
        minted.issued_at.FromSeconds(claims["iat"])
        minted.expires_at.FromSeconds(claims["exp"])
        print(json_format.MessageToJson(minted, preserving_proto_field_name=True, indent=2))
    else:
        print(token)
    return 0
