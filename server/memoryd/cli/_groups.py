"""``memoryd --help`` lists the commands by who uses them, not in the order they were registered.

argparse lists subcommands in one block; ``GroupedHelpParser`` (the root parser only) prints
one section per group of ``GROUPS`` instead, from the commands the parser has registered —
each command is registered once, and this table only says where it is listed. A registered
command no group names is listed under "other commands" (and tests/domain/test_cli_help.py
fails); a name no command has registered is left out (and the test fails too).
"""

from __future__ import annotations

import argparse

GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("agents and developers", ("write", "recall", "view", "history", "erase", "end-session", "resume-session",
                               "mcp")),
    ("operators", ("serve", "worker", "migrate", "health", "outbox", "reindex", "lifecycle", "consolidate")),
    ("security and administration", ("token", "keys", "views", "audit", "export", "import")),
    ("benchmarks", ("bench",)),
)
OTHER = "other commands"


class GroupedHelpParser(argparse.ArgumentParser):
    """An ArgumentParser whose help lists its subcommands in the sections of ``GROUPS``."""

    def format_help(self) -> str:
        commands = _subcommands(self)
        if commands is None:
            return super().format_help()
        formatter = self._get_formatter()
        formatter.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        formatter.add_text(self.description)
        for title, listed in grouped(commands):
            formatter.start_section(title)
            formatter.add_arguments(listed)
            formatter.end_section()
        for group in self._action_groups:
            actions = [a for a in group._group_actions if a is not commands]
            if actions:
                formatter.start_section(group.title)
                formatter.add_arguments(actions)
                formatter.end_section()
        formatter.add_text(self.epilog)
        return formatter.format_help()


def grouped(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> list[tuple[str, list[argparse.Action]]]:
    """Each group's title and its registered commands' help lines, in the table's order; the
    commands no group names last, under ``OTHER``."""
    lines = {action.dest: action for action in commands._choices_actions}
    sections = [(title, [lines.pop(name) for name in names if name in lines]) for title, names in GROUPS]
    return [(title, listed) for title, listed in [*sections, (OTHER, list(lines.values()))] if listed]


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[argparse.ArgumentParser] | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
