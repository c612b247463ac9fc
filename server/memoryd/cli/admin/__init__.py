"""Commands that open the stores themselves (operators on the server's machine): ``serve``,
``worker``, ``keys``, ``index``, ``lifecycle``, ``consolidate``, ``audit``.
"""

from ._admin import add_admin_commands
from ._audit import add_audit_commands
from ._consolidate import add_consolidate_command
from ._index import add_index_commands
from ._keys import add_key_commands
from ._lifecycle import add_lifecycle_commands

__all__ = ["add_admin_commands", "add_audit_commands", "add_consolidate_command", "add_index_commands",
           "add_key_commands", "add_lifecycle_commands"]
