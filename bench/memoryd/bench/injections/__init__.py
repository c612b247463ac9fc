"""The instruction-like text filters measured: our injections and near misses by round, held-out
sets, turns from real conversations that must pass, and the meaning judge's experiments
(``memoryd bench injections``).
"""

from ._cli_injections import add_injections_command

__all__ = ["add_injections_command"]
