"""The extraction benchmark: scripted dialogues through a real server and a scripted model, and
what was stored, dropped or leaked (``memoryd bench extraction``).
"""

from ._cli_extraction import add_extraction_command

__all__ = ["add_extraction_command"]
