"""MADial-Bench (Chinese and English recall from dialogue) and the bilingual set: reading the
data, running the questions against a server, and reporting them (``memoryd bench madial``,
``memoryd bench bilingual``).
"""

from ._cli_bilingual import add_bilingual_command, relevance_arg
from ._cli_madial import add_madial_command
from ._madial import MadialOptions, SHAPES, run_madial
from ._madial_data import find_madial, load_dialogues, load_memories, parse_lines

__all__ = ["MadialOptions", "SHAPES", "add_bilingual_command", "add_madial_command", "find_madial",
           "load_dialogues", "load_memories", "parse_lines", "relevance_arg", "run_madial"]
