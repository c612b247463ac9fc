"""The CLI's help: every option and command has one, and every command that talks to a server has
the same connection options (the commands run against servers: tests/e2e/test_operator_cli.py)."""

from __future__ import annotations

import argparse

from memoryd.cli import build_parser

CLIENT_COMMANDS = ["write", "recall", "view", "history", "erase", "export", "import", "views apply", "views list",
                   "views delete", "health", "token issue", "mcp"]
CONNECTION = {"--addr", "--tls", "--tls-ca", "--tls-cert", "--tls-key", "--tls-server-name"}


def _commands(parser: argparse.ArgumentParser, path: str = "") -> dict[str, argparse.ArgumentParser]:
    found = {path: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_commands(sub, f"{path} {name}".strip()))
    return found


def test_every_option_and_command_has_help():
    missing = []
    for path, parser in _commands(build_parser()).items():
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"{path} {c.dest}" for c in action._choices_actions if not (c.help or "").strip()]
            elif not isinstance(action, argparse._HelpAction) and not (action.help or "").strip():
                missing.append(f"memoryd {path} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


def test_every_command_that_talks_to_a_server_has_the_same_connection_options():
    commands = _commands(build_parser())
    for path in CLIENT_COMMANDS:
        options = {o for a in commands[path]._actions for o in a.option_strings}
        assert CONNECTION <= options, (path, CONNECTION - options)
    # ...defined once: the same help text everywhere.
    helps = {path: {a.option_strings[0]: a.help for a in commands[path]._actions if a.option_strings}
             for path in CLIENT_COMMANDS}
    assert len({tuple(sorted((o, h[o]) for o in CONNECTION)) for h in helps.values()}) == 1
    # A benchmark starts a server of its own unless given --addr (its own option); with one it
    # speaks TLS as the others do.
    assert CONNECTION <= {o for a in commands["bench locomo"]._actions for o in a.option_strings}
