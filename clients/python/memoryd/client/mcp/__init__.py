"""memoryd's MCP bridge: a Model Context Protocol server (the official ``mcp`` SDK) whose tools —
``remember``, ``recall``, ``forget`` and ``list`` — call a memoryd server over gRPC with the
caller's own token, so the server's view of that agent applies to every tool.

    memoryd-mcp                       # stdio, for an MCP host that starts it
    memoryd-mcp --transport streamable-http --http-addr 127.0.0.1:8765

Install it with the client: ``pip install './clients/python[mcp]'``; ``memoryd mcp`` (the server's
command line) runs the same bridge with the same options. Building the parser imports no part of
the SDK; running the bridge does (``_server``). docs/mcp.md has the tools and a host's
configuration.
"""

from __future__ import annotations

import argparse
import sys

from ..cli import OptionError, connection_options, token_options
from ._options import DEFAULT_HTTP_ADDR, BridgeSettings, bridge_options, settings_from

__all__ = ["BridgeSettings", "DEFAULT_HTTP_ADDR", "bridge_options", "main", "run", "settings_from"]

MISSING_SDK_HINT = "the bridge needs the MCP SDK: pip install 'memoryd-client[mcp]' (make install installs it)"


def run(settings: BridgeSettings) -> None:
    """Serve the tools until the host closes stdin (stdio) or the process is stopped (HTTP)."""
    try:
        from ._server import serve
    except ImportError as missing:
        if missing.name is None or missing.name.split(".")[0] not in ("mcp", "mcp_types", "pydantic"):
            raise
        raise OptionError(f"the MCP SDK is not installed ({missing.name})", MISSING_SDK_HINT) from None
    serve(settings)


def main(argv: list[str] | None = None) -> int:
    """``memoryd-mcp``: the bridge as a command of the client distribution."""
    parser = argparse.ArgumentParser(
        prog="memoryd-mcp", parents=[connection_options(), token_options(admin=False), bridge_options()],
        description="An MCP server whose tools (remember, recall, forget, list) call memoryd with the agent's "
                    "token: the server's view of that agent applies to every tool.")
    args = parser.parse_args(argv)
    try:
        run(settings_from(args))
    except (OptionError, OSError) as error:
        # stdout is the MCP channel on stdio: errors go to stderr only.
        print(f"memoryd-mcp: error: {error}", file=sys.stderr)
        if isinstance(error, OptionError) and error.hint:
            print(f"hint: {error.hint}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0
