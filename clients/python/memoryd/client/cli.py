"""The command-line options of every program that talks to a memoryd server — the ``memoryd``
client commands and ``memoryd-mcp`` — defined once, here, in the client distribution (which
``memoryd-mcp`` ships in without the server).

Each option falls back to an environment variable, so a shell (or a container, or an MCP host's
configuration) set up once serves every command::

    --addr             MEMORYD_ADDR              (default 127.0.0.1:50051)
    --tls-ca           MEMORYD_TLS_CA            speak TLS, trusting this CA (PEM)
    --tls              -                         speak TLS, trusting the system's CAs
    --tls-cert         MEMORYD_TLS_CLIENT_CERT   client certificate for mutual TLS (PEM)
    --tls-key          MEMORYD_TLS_CLIENT_KEY    its private key (PEM)
    --tls-server-name  MEMORYD_TLS_SERVER_NAME   the name the server's certificate carries
    --token            MEMORYD_TOKEN (agent commands) / MEMORYD_ADMIN_TOKEN (admin commands)
    --token-file       the embedded default's demo-agent / admin token

The client variables are not the server's (MEMORYD_TLS_CERT_FILE, …), so a probe run inside
a server's container does not mistake the server's certificate for a client's.
``--ca-file``, ``--cert-file``, ``--key-file`` and ``--server-name`` are the names
``memoryd health`` had first; they still work. A bad combination raises :class:`OptionError`, a
``ValueError`` with a one-line ``hint``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ._options import TLS

__all__ = ["DEFAULT_ADDR", "AGENT_TOKEN_FILE", "ADMIN_TOKEN_FILE", "TOKEN_HINT", "OptionError", "connection_options",
           "token_options", "dialable", "uses_tls", "tls_settings", "read_token"]

DEFAULT_ADDR = "127.0.0.1:50051"
AGENT_TOKEN_FILE = ".memoryd/tokens/demo-agent.token"
ADMIN_TOKEN_FILE = ".memoryd/tokens/admin.token"

TOKEN_HINT = ("a tenant admin mints one with `memoryd token issue --agent A` (or `--tenant T` where the signing key "
              "is); pass it with --token, MEMORYD_TOKEN or --token-file")


class OptionError(ValueError):
    """Options that cannot work together, or a credential that is not there: a one-line message
    and, if known, a hint."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def connection_options(*, addr: bool = True) -> argparse.ArgumentParser:
    """The parent parser of every command that talks to a server: where it is and how to
    speak TLS to it (``addr=False``: a command with an --addr of its own, such as a benchmark
    that starts a server unless given one)."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("server connection")
    if addr:
        group.add_argument("--addr", default=os.environ.get("MEMORYD_ADDR") or DEFAULT_ADDR, metavar="HOST:PORT",
                           help=f"the server's address (default: $MEMORYD_ADDR, else {DEFAULT_ADDR})")
    group.add_argument("--tls", action="store_true",
                       help="speak TLS, trusting the system's certificate authorities (implied by --tls-ca, "
                            "--tls-cert and --tls-key)")
    group.add_argument("--tls-ca", "--ca-file", dest="tls_ca", type=Path, metavar="PEM",
                       default=_env_path("MEMORYD_TLS_CA"),
                       help="speak TLS, trusting this CA certificate (default: $MEMORYD_TLS_CA)")
    group.add_argument("--tls-cert", "--cert-file", dest="tls_cert", type=Path, metavar="PEM",
                       default=_env_path("MEMORYD_TLS_CLIENT_CERT"),
                       help="the client certificate, for a server that requires mutual TLS; needs --tls-key "
                            "(default: $MEMORYD_TLS_CLIENT_CERT)")
    group.add_argument("--tls-key", "--key-file", dest="tls_key", type=Path, metavar="PEM",
                       default=_env_path("MEMORYD_TLS_CLIENT_KEY"),
                       help="the client certificate's private key (default: $MEMORYD_TLS_CLIENT_KEY)")
    group.add_argument("--tls-server-name", "--server-name", dest="tls_server_name", metavar="NAME",
                       default=os.environ.get("MEMORYD_TLS_SERVER_NAME", ""),
                       help="the name the server's certificate carries, when it is not the host of --addr, "
                            "e.g. a probe on loopback (default: $MEMORYD_TLS_SERVER_NAME)")
    return parent


def token_options(*, admin: bool) -> argparse.ArgumentParser:
    """The parent parser of the token options: an agent's token, or an admin's (for views and
    token issuance; not $MEMORYD_TOKEN, which is usually an agent's)."""
    variable, default_file = ("MEMORYD_ADMIN_TOKEN", ADMIN_TOKEN_FILE) if admin else ("MEMORYD_TOKEN",
                                                                                      AGENT_TOKEN_FILE)
    who = "an admin's" if admin else "the agent's"
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("credential")
    group.add_argument("--token", default=os.environ.get(variable, ""),
                       help=f"{who} bearer token (default: ${variable}, else --token-file)")
    group.add_argument("--token-file", default=default_file, metavar="FILE",
                       help=f"a file holding {who} token (default: {default_file}, the embedded default's)")
    return parent


def _env_path(variable: str) -> Path | None:
    value = os.environ.get(variable, "")
    return Path(value) if value else None


def dialable(addr: str) -> str:
    """A listen address such as 0.0.0.0:50051 or [::]:50051 (MEMORYD_ADDR in a container) is
    dialled on loopback."""
    host, _, port = addr.rpartition(":")
    return f"127.0.0.1:{port}" if host in ("0.0.0.0", "[::]", "") else addr


def uses_tls(args: argparse.Namespace) -> bool:
    return bool(args.tls or args.tls_ca or args.tls_cert or args.tls_key)


def tls_settings(args: argparse.Namespace) -> TLS | None:
    """The TLS the options ask for (None: plaintext), checked before any call."""
    if not uses_tls(args):
        if args.tls_server_name:
            raise OptionError("--tls-server-name needs TLS", "add --tls-ca CA.pem (or --tls for the system's CAs)")
        return None
    if (args.tls_cert is None) != (args.tls_key is None):
        raise OptionError("mutual TLS needs both --tls-cert and --tls-key")
    return TLS(ca_cert=args.tls_ca, client_cert=args.tls_cert, client_key=args.tls_key,
               server_name=args.tls_server_name)


def read_token(args: argparse.Namespace, *, admin: bool = False) -> str:
    """The token from --token (or its variable), else from --token-file; none with a client
    certificate and no token (the certificate names the caller)."""
    if args.token:
        return str(args.token).strip()
    path = Path(args.token_file)
    if not path.exists():
        if getattr(args, "tls_cert", None) is not None:
            return ""  # mutual TLS: the client certificate names the caller
        variable = "MEMORYD_ADMIN_TOKEN" if admin else "MEMORYD_TOKEN"
        what = "admin token" if admin else "token"
        raise OptionError(f"no {what}: --token and {variable} are empty and {path} does not exist", TOKEN_HINT)
    return path.read_text().strip()
