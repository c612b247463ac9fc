"""The operator's view of the CLI: `memoryd --help` lists every command with one line of help,
failures are one `memoryd: error: …` line plus a `hint: …` line, and `memoryd health` (the
container and Kubernetes probe) exits 0 only for a serving server."""

from __future__ import annotations

import contextlib
import io
import re
import socket
import subprocess

import pytest

from memoryd.cli import build_parser

from ..support import MEMORYD, ROOT, ServerProcess, server_env

COMMANDS = ["serve", "worker", "migrate", "token", "views", "reindex", "export", "import", "audit", "lifecycle",
            "consolidate", "bench", "health", "outbox", "write", "recall", "view", "history", "erase"]


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MEMORYD, *args], cwd=ROOT, env=server_env(**env), capture_output=True, text=True,
                          timeout=60)


def _closed_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"  # nothing listens once the socket is closed


def test_help_lists_every_command_with_one_line_of_help():
    result = _run("--help")
    assert result.returncode == 0, result.stderr
    # Commands are listed under their groups' titles (tests/domain/test_cli_help.py); options start with -.
    listed = dict(re.findall(r"^  (\w[\w-]*)\s+(\S.*)$", result.stdout, re.MULTILINE))
    assert set(COMMANDS) <= set(listed), set(COMMANDS) - set(listed)
    assert all(help_text.strip() for help_text in listed.values())
    # And each command has its own help: read from the parser the entry point just ran, in this
    # process (a process per command cost a second each, most of it imports).
    parser = build_parser()
    for command in COMMANDS:
        with pytest.raises(SystemExit) as exit_, contextlib.redirect_stdout(io.StringIO()) as out:
            parser.parse_args([command, "--help"])
        assert exit_.value.code == 0 and out.getvalue().startswith(f"usage: memoryd {command}"), command


def test_an_unreachable_server_is_one_error_line_and_a_hint():
    addr = _closed_port()
    result = _run("recall", "--addr", addr, "--token", "t", "--query", "tea")
    assert result.returncode == 1 and result.stdout == ""
    error, hint = result.stderr.strip().splitlines()
    assert error.startswith(f"memoryd: error: UNAVAILABLE: no memoryd answering at {addr}")
    assert hint.startswith("hint: ") and "memoryd serve" in hint and "MEMORYD_ADDR" in hint


def test_a_missing_token_is_one_error_line_and_a_hint(tmp_path):
    result = _run("recall", "--addr", _closed_port(), "--token-file", str(tmp_path / "none.token"), "--query", "x")
    assert result.returncode == 2
    error, hint = result.stderr.strip().splitlines()
    assert error.startswith("memoryd: error: no token:")
    assert hint.startswith("hint: ") and "memoryd token issue" in hint


def test_a_bad_setting_is_one_error_line(tmp_path):
    result = _run("token", "issue", "--tenant", "t", "--agent", "a", MEMORYD_VIEW_CACHE_SECONDS="600",
                  MEMORYD_DATA_DIR=str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[0] == "memoryd: error: view_cache_seconds must be between 0 and 60"


def test_health_exits_zero_for_a_serving_server(server):
    for service in ("", "memoryd.v1.MemoryService"):
        result = _run("health", "--addr", server.target, "--service", service)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip().endswith(": SERVING")
    assert _run("health", "--addr", server.target, "-q").stdout == ""


def test_health_fails_with_a_hint_when_nothing_answers():
    result = _run("health", "--addr", _closed_port(), "--timeout", "1")
    assert result.returncode == 1
    error, hint = result.stderr.strip().splitlines()
    assert error.startswith("memoryd: error: ") and hint.startswith("hint: ")


def test_health_refuses_an_unknown_service(server):
    result = _run("health", "--addr", server.target, "--service", "no.such.Service")
    assert result.returncode == 1
    assert result.stderr.startswith("memoryd: error: NOT_FOUND")


def test_a_second_serve_on_a_data_dir_in_use_is_one_error_line_and_a_hint(tmp_path, private_database, key_file):
    data_dir = tmp_path / "data"
    env = {"MEMORYD_DATA_DIR": str(data_dir), "MEMORYD_POSTGRES_DSN": private_database,
           "MEMORYD_SIGNING_KEY_FILE": str(key_file)}
    first = ServerProcess(server_env(**env), tmp_path / "first.log").start()
    try:
        assert first.process is not None
        second = _run("serve", **env)
        assert second.returncode == 1 and "Traceback" not in second.stderr
        error, hint = second.stderr.strip().splitlines()
        assert error == f"memoryd: error: another memoryd is already serving {data_dir} (pid {first.process.pid})"
        assert hint.startswith("hint: ") and "MEMORYD_DATA_DIR" in hint
        assert _run("health", "--addr", first.target).returncode == 0  # the first one is untouched
    finally:
        assert first.stop() == 0
    # Once the first has stopped, the data directory serves again.
    again = ServerProcess(server_env(**env), tmp_path / "again.log").start()
    assert again.stop() == 0
