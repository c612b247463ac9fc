"""Commands that talk to a running server through ``memoryd.client``: the RPC client commands,
archives, health, the MCP bridge, token issuance and view administration.
"""

from ._archive import add_archive_commands
from ._client import add_client_commands
from ._health import add_health_command
from ._mcp import add_mcp_command
from ._token_issue import add_token_issue, print_token
from ._views import add_view_commands

__all__ = ["add_archive_commands", "add_client_commands", "add_health_command", "add_mcp_command", "add_token_issue",
           "add_view_commands", "print_token"]
