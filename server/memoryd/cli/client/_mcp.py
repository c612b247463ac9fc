"""``memoryd mcp``: memoryd's MCP bridge (``memoryd.client.mcp``, the same as ``memoryd-mcp`` of the
client distribution) with the connection and token options of every client command. The parser
loads only the bridge's options; the MCP SDK is imported when the command runs."""

from __future__ import annotations

import argparse
from typing import Any

from memoryd.client.mcp import bridge_options, run, settings_from

from .._connect import connection_options, token_options


def add_mcp_command(commands: Any) -> None:
    help = "serve memoryd's tools (remember, recall, forget, list) to an MCP host, as the token's agent"
    parser = commands.add_parser(
        "mcp", help=help, parents=[connection_options(), token_options(admin=False), bridge_options()],
        description="An MCP server (stdio by default) whose tools call memoryd with the agent's token: the "
                    "server's view of that agent applies to every tool. docs/mcp.md has a host's configuration.")
    parser.set_defaults(run=_mcp)


def _mcp(args: argparse.Namespace) -> int:
    run(settings_from(args))
    return 0
