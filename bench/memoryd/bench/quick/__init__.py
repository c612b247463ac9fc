"""``memoryd bench quick``: issue 41's targets in one run beside the previous one and Mem0, with
its history, report and plot.
"""

from ._cli_quick import add_quick_command

__all__ = ["add_quick_command"]
