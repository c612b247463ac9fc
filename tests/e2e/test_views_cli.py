"""``memoryd views``: a declarative file applied idempotently, with a printed diff."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import grpc
import yaml

from memoryd.domain import MEMORY_FIELDS
from memoryd.v1 import view_admin_service_pb2 as admin

from ..support import MEMORYD, ROOT, Agent, ServerProcess, server_env, token_for, unique

FIRST = """
views:
  alpha:
    read: {fact: "*"}
    fields: [id, text]
  beta:
    description: support
    read: {event: "*", preference: [primary_language]}
    write: {event: "*"}
    erase: [ids]
    fields: [id, key, text]
"""
SECOND = """
views:
  beta:
    description: support
    read: {event: "*", preference: [primary_language]}
    write: {event: "*"}
    erase: [ids]
    fields: [id, key, text, tags]
  gamma:
    read: {"*": "*"}
    write: {"*": "*"}
    erase: true
    fields: "*"
"""


def _views(server: ServerProcess, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = server_env()
    return subprocess.run([*MEMORYD, "views", *args, "--addr", server.target, "--token", token], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def _stored(channel: grpc.Channel, token: str) -> dict[str, list[str]]:
    page = Agent(channel, token).call("ListViews", admin.ListViewsRequest())
    return {v.agent: sorted(v.visible_fields) for v in page.views}


def test_apply_prints_a_diff_and_is_idempotent(server, channel, key_file, tmp_path: Path):
    tenant = unique("tenant")
    token = token_for(key_file, tenant, "ops", roles=("admin",))
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text(FIRST)
    second.write_text(SECOND)

    applied = _views(server, token, "apply", str(first))
    assert applied.returncode == 0, applied.stderr
    assert "+ alpha (version 1)" in applied.stdout and "+ beta (version 1)" in applied.stdout
    again = _views(server, token, "apply", str(first))
    assert "= alpha (version 1, unchanged)" in again.stdout and "= beta (version 1, unchanged)" in again.stdout
    assert "0 view(s) changed" in again.stderr

    preview = _views(server, token, "apply", str(second), "--dry-run")
    assert preview.returncode == 0
    assert "~ beta (version ?)" in preview.stdout
    assert 'visible_fields: ["id", "key", "text"] -> ["id", "key", "tags", "text"]' in preview.stdout
    assert "+ gamma" in preview.stdout and "alpha (not in the file; kept" in preview.stdout
    assert _stored(channel, token) == {"alpha": ["id", "text"], "beta": ["id", "key", "text"]}  # nothing changed

    pruned = _views(server, token, "apply", str(second), "--prune")
    assert "~ beta (version 2)" in pruned.stdout and "- alpha (deleted)" in pruned.stdout
    stored = _stored(channel, token)
    assert set(stored) == {"beta", "gamma"} and stored["gamma"] == sorted(MEMORY_FIELDS)

    # `views list` prints YAML that applies back unchanged.
    listed = _views(server, token, "list")
    assert listed.returncode == 0 and yaml.safe_load(listed.stdout)["views"]["beta"]["version"] == 2
    round_trip = tmp_path / "listed.yaml"
    round_trip.write_text(listed.stdout)
    replay = _views(server, token, "apply", str(round_trip))
    assert replay.returncode == 0 and "0 view(s) changed" in replay.stderr, replay.stdout


def test_a_bad_file_or_a_non_admin_token_changes_nothing(server, channel, key_file, tmp_path: Path):
    tenant = unique("tenant")
    admin_token = token_for(key_file, tenant, "ops", roles=("admin",))
    bad = tmp_path / "bad.yaml"
    bad.write_text(textwrap.dedent("""
        views:
          alpha:
            read: {facts: "*"}
    """))
    refused = _views(server, admin_token, "apply", str(bad))
    assert refused.returncode == 2 and "unknown category 'facts'" in refused.stderr
    bad.write_text("views:\n  alpha:\n    fields: [text, tenant_id]\n")
    refused = _views(server, admin_token, "apply", str(bad))
    assert refused.returncode == 2 and "views.alpha: fields: 'tenant_id' is not a field" in refused.stderr
    good = tmp_path / "good.yaml"
    good.write_text(FIRST)
    denied = _views(server, token_for(key_file, tenant, "alpha"), "apply", str(good))
    assert denied.returncode == 1 and "PERMISSION_DENIED" in denied.stderr
    assert _stored(channel, admin_token) == {}
