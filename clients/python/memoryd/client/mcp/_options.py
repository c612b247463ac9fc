"""How the bridge is run: its transport options, and the settings ``memoryd-mcp`` and
``memoryd mcp`` both build from their parsed options. Light: building a parser never imports the
MCP SDK."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from .._options import TLS
from ..cli import OptionError, dialable, read_token, tls_settings

DEFAULT_HTTP_ADDR = "127.0.0.1:8765"


@dataclass(frozen=True)
class BridgeSettings:
    """Where the memoryd server is and who calls it (``token`` is the caller's own: the server
    applies that agent's view to every tool), and how the MCP host reaches the bridge."""

    target: str
    token: str
    tls: TLS | None = None
    transport: str = "stdio"
    http_host: str = "127.0.0.1"
    http_port: int = 8765
    # Each HTTP caller's own token (Authorization: Bearer), not ``token``, for its tool calls.
    caller_tokens: bool = False


def bridge_options() -> argparse.ArgumentParser:
    """The parent parser of the bridge's own options (the connection and token options are
    ``memoryd.client.cli``'s, as in every memoryd command)."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("MCP transport")
    group.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio",
                       help="stdio (default: the MCP host starts the bridge and talks over its stdin and stdout) "
                            "or streamable-http (the bridge listens on --http-addr)")
    group.add_argument("--http-addr", default=DEFAULT_HTTP_ADDR, metavar="HOST:PORT",
                       help=f"where streamable-http listens (default: {DEFAULT_HTTP_ADDR}, on loopback); "
                            "its endpoint is http://HOST:PORT/mcp")
    group.add_argument("--caller-tokens", action="store_true",
                       help="streamable-http only: every HTTP request must carry its caller's own memoryd token "
                            "('Authorization: Bearer <token>', else 401) and each tool call is made with it, so "
                            "each caller gets its own view; the bridge then needs no token of its own")
    return parent


def settings_from(args: argparse.Namespace) -> BridgeSettings:
    """The bridge's settings from the parsed options; :class:`~memoryd.client.cli.OptionError`
    (a ValueError with a hint) when they cannot work."""
    host, _, port = str(args.http_addr).rpartition(":")
    if not host or not port.isdigit():
        raise OptionError(f"--http-addr {args.http_addr!r} is not HOST:PORT", "e.g. --http-addr 127.0.0.1:8765")
    caller_tokens = bool(getattr(args, "caller_tokens", False))
    if caller_tokens and args.transport != "streamable-http":
        raise OptionError("--caller-tokens needs --transport streamable-http",
                          "over stdio the host starts one bridge per agent: give it that agent's token")
    return BridgeSettings(target=dialable(args.addr), token="" if caller_tokens else read_token(args),
                          tls=tls_settings(args), transport=args.transport, http_host=host.strip("[]"),
                          http_port=int(port), caller_tokens=caller_tokens)
