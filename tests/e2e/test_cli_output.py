"""What the client commands print, against the suite's server: a table on a terminal (a pty
here), with every id whole and the memory's text; JSON, exactly as before tables existed, into a
pipe or with --json; `view` shows the agent's view only with --show-view. And `memoryd serve
--addr` listens where it is told, over MEMORYD_ADDR."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import termios
import threading

from google.protobuf import json_format

from ..support import MEMORYD, ROOT, ServerProcess, draft, free_port, server_env, unique

ID_PATTERN_LENGTH = 36  # a UUID, as the server writes it


def _command(server, agent, *args: str) -> list[str]:
    return [*MEMORYD, *args, "--addr", server.target, "--token", agent.token]


def _piped(server, agent, *args: str) -> str:
    result = subprocess.run(_command(server, agent, *args), cwd=ROOT, env={**server.env, "COLUMNS": "120"},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _on_a_terminal(server, agent, *args: str, columns: int = 120) -> str:
    """What the command prints to a terminal ``columns`` wide."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in server.env.items() if k not in ("COLUMNS", "LINES")}
    read: list[bytes] = []

    def drain() -> None:  # for the command's whole life, so the terminal's buffer never fills
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the follower side closed: the command has ended
                return
            if not chunk:
                return
            read.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        process = subprocess.run(_command(server, agent, *args), cwd=ROOT, env=env, stdout=follower,
                                 stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=60)
    finally:
        os.close(follower)
    reader.join(timeout=10)
    os.close(leader)
    assert process.returncode == 0, process.stderr
    return b"".join(read).decode().replace("\r\n", "\n")


def _memories(agent) -> tuple[str, list[str]]:
    subject = unique("subject")
    written = agent.write(subject, draft("fact", "Alice lives in Lisbon", key="home_city"),
                          draft("preference", "爱丽丝喜欢喝乌龙茶，每天早上都要泡一壶。" * 4))
    return subject, [r.memory_id for r in written.results]


def test_piped_output_is_the_json_it_always_was(server, agent):
    subject, ids = _memories(agent)
    printed = _piped(server, agent, "view", "--subject", subject)
    # The response as the command printed it before it had tables, the view included.
    before = json_format.MessageToJson(agent.list(subject), preserving_proto_field_name=True, indent=2,
                                       ensure_ascii=False)
    assert printed == before + "\n"
    assert sorted(m["id"] for m in json.loads(printed)["memories"]) == sorted(ids)
    assert "view" in json.loads(printed)
    # --json on a terminal prints the same.
    assert _on_a_terminal(server, agent, "view", "--subject", subject, "--json") == printed


def test_a_terminal_gets_a_table_with_whole_ids_and_the_texts(server, agent):
    subject, ids = _memories(agent)
    table = _on_a_terminal(server, agent, "view", "--subject", subject, columns=100)
    lines = table.splitlines()
    assert lines[0].split() == ["id", "category", "key", "text"]
    rows = {line.split()[0]: line for line in lines[2:]}
    assert sorted(rows) == sorted(ids)  # each id whole, one row each
    assert rows[ids[0]].split()[1:] == ["fact", "home_city", "Alice", "lives", "in", "Lisbon"]
    long_row = rows[ids[1]]
    assert "爱丽丝喜欢喝乌龙茶" in long_row and long_row.endswith("…")  # cut to the terminal's width
    # The agent's view only when asked for.
    assert "visible_fields" not in table and "read_rules" not in table
    shown = _on_a_terminal(server, agent, "view", "--subject", subject, "--show-view", columns=100)
    assert shown.startswith(table) and "visible_fields" in shown and "read_rules" in shown


def test_table_forces_the_table_into_a_pipe_and_recall_rounds_scores(server, agent):
    subject, ids = _memories(agent)
    lines = _piped(server, agent, "recall", "--subject", subject, "--key", "home_city", "--table").splitlines()
    assert lines[0].split() == ["score", "id", "category", "key", "text"]
    score, memory_id, *rest = lines[2].split()
    assert memory_id == ids[0] and rest == ["fact", "home_city", "Alice", "lives", "in", "Lisbon"]
    assert len(score.split(".")[1]) == 2
    wrote = _piped(server, agent, "write", "--subject", subject, "--text", "Alice keeps bees", "--table")
    assert wrote.splitlines()[0].split() == ["id", "outcome", "version", "reason"]
    new_id, outcome, version = wrote.splitlines()[2].split()
    assert len(new_id) == ID_PATTERN_LENGTH and (outcome, version) == ("created", "1")
    assert new_id in _piped(server, agent, "view", "--subject", subject, "--table")
    erased = _piped(server, agent, "erase", "--subject", subject, "--id", new_id, "--mode", "purge", "--table")
    assert "mode: purge" in erased and "removed: memories 1, versions 1" in erased and "verified: yes" in erased


def test_serve_listens_on_the_addr_it_is_given_over_memoryd_addr(private_database, key_file, tmp_path):
    port = free_port()
    env = server_env(MEMORYD_DATA_DIR=str(tmp_path), MEMORYD_POSTGRES_DSN=private_database,
                     MEMORYD_SIGNING_KEY_FILE=str(key_file), MEMORYD_ADDR=f"127.0.0.1:{free_port()}")
    process = ServerProcess(env, tmp_path / "server.log", args=("--addr", f"127.0.0.1:{port}")).start()
    try:
        assert process.port == port
        health = subprocess.run([*MEMORYD, "health", "--addr", f"127.0.0.1:{port}"], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=60)
        assert health.returncode == 0 and health.stdout.strip().endswith("SERVING"), health.stderr
    finally:
        process.stop()


def test_a_reader_that_goes_away_ends_the_command_quietly():
    # `memoryd serve --help | head -3`: the pipe's reader has gone before the help is written.
    reader, writer = os.pipe()
    os.close(reader)
    try:
        result = subprocess.run([*MEMORYD, "serve", "--help"], cwd=ROOT, env=server_env(), stdout=writer,
                                stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(writer)
    assert (result.returncode, result.stderr) == (141, "")
