"""The CLI's help: every option and command has one, every command that talks to a server has
the same connection options (the commands run against servers: tests/e2e/test_operator_cli.py),
`memoryd --help` lists the commands by who uses them, and `memoryd serve --help` and `memoryd
worker --help` list the main settings with their variables and defaults."""

from __future__ import annotations

import argparse
import contextlib
import io
import re

import pytest

from memoryd.cli import build_parser
from memoryd.cli._groups import GROUPS, OTHER
from memoryd.cli.admin._settings import SERVE_SETTINGS, WORKER_SETTINGS, describe
from memoryd.server import SETTING_VARIABLES, Config

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


def _help_of(*command: str) -> str:
    with pytest.raises(SystemExit) as exit_, contextlib.redirect_stdout(io.StringIO()) as out:
        build_parser().parse_args([*command, "--help"])
    assert exit_.value.code == 0
    return out.getvalue()


def _sections(text: str) -> dict[str, list[str]]:
    """The help's sections ("title:" at the margin) and the commands or options listed in each."""
    sections: dict[str, list[str]] = {}
    title = ""
    for line in text.splitlines():
        if re.match(r"^\S.*:$", line):
            title = line[:-1]
            sections[title] = []
        elif title and (match := re.match(r"^  (\S+)", line)):
            sections[title].append(match.group(1).rstrip(","))
    return sections


def test_every_command_is_listed_in_exactly_one_group_of_the_help():
    registered = [c.dest for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
                  for c in a._choices_actions]
    named = [name for _, names in GROUPS for name in names]
    assert sorted(set(named)) == sorted(named), "a command is in two groups"
    assert sorted(set(named) - set(registered)) == [], "a group names a command that does not exist"
    assert sorted(set(registered) - set(named)) == []
    sections = _sections(_help_of())
    listed = [name for title, _ in GROUPS if title in sections for name in sections[title]]
    assert sorted(listed) == sorted(registered) and OTHER not in sections
    assert [t for t in sections if t != "options"] == [t for t, names in GROUPS if set(names) & set(registered)]
    assert {"write", "recall", "view"} <= set(sections["agents and developers"])
    assert {"serve", "worker", "migrate", "health"} <= set(sections["operators"])
    assert {"token", "keys", "views", "audit"} <= set(sections["security and administration"])
    assert sections["options"] == ["-h", "--config", "-v", "--version"]


@pytest.mark.parametrize("command,settings", [("serve", SERVE_SETTINGS), ("worker", WORKER_SETTINGS)],
                         ids=["serve", "worker"])
def test_the_server_commands_help_lists_their_settings_with_variables_and_defaults(command, settings):
    text = _help_of(command)
    defaults = Config()
    variables = {name: variable for variable, name in SETTING_VARIABLES.items()}
    for name in settings:
        shown = str(getattr(defaults, name)).lower() if isinstance(getattr(defaults, name), bool) else \
            str(getattr(defaults, name)) or "none"
        assert re.search(rf"^  {variables[name]} \({name}\), default: {re.escape(shown)}", text, re.MULTILINE), name
    assert "MEMORYD_CONFIG" in text


def test_serve_help_names_the_listen_address_its_variable_and_default():
    text = _help_of("serve")
    assert "--addr HOST:PORT" in text
    assert "  MEMORYD_ADDR (addr), default: 127.0.0.1:50051" in text.splitlines()
    assert "  MEMORYD_DATA_DIR (data_dir), default: .memoryd (in the current directory)" in text.splitlines()


def test_a_setting_the_configuration_does_not_define_breaks_the_help():
    # What a renamed setting does to the help: it fails, here and in `memoryd serve --help`,
    # instead of printing a name the server no longer reads.
    with pytest.raises(KeyError):
        describe(("no_such_setting",))
