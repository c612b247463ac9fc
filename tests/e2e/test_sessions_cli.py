"""`memoryd write --session-id`, `memoryd end-session` and `memoryd resume-session` against the
suite's server: a session written from one shell ends, and resumes from another, as JSON.
The CLI calls through ``memoryd.client``, whose ``end_session`` and ``resume_session`` come with
issue 43's client change (h43-clients): until that is merged this test fails with an
AttributeError, not a wrong answer."""

from __future__ import annotations

import json
import subprocess

from ..support import MEMORYD, ROOT, full_view, put_view, token_for, unique


def _run(server, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MEMORYD, *args, "--addr", server.target, "--token", token], cwd=ROOT, env=server.env,
                          capture_output=True, text=True, timeout=60)


def test_a_session_ends_and_resumes_from_the_command_line(server, channel, key_file, tenant):
    put_view(channel, key_file, tenant, full_view("agent-1"))
    subject = unique("subject")
    wrote = _run(server, token_for(key_file, tenant), "write", "--subject", subject, "--key", "home_airport",
                 "--text", "Home airport is Lyon", "--session-id", "s1")
    assert wrote.returncode == 0, wrote.stderr
    ended = _run(server, token_for(key_file, tenant), "end-session", "--subject", subject, "--session-id", "s1")
    assert ended.returncode == 0, ended.stderr
    snapshot = json.loads(ended.stdout)["snapshot"]
    assert snapshot["session_id"] == "s1" and snapshot["summary"]["text"] == "Home airport is Lyon"
    resumed = _run(server, token_for(key_file, tenant), "resume-session", "--subject", subject)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["snapshot"] == snapshot
    missing = _run(server, token_for(key_file, tenant), "resume-session", "--subject", unique("nobody"))
    assert missing.returncode == 1 and missing.stderr.startswith("memoryd: error: NOT_FOUND")
