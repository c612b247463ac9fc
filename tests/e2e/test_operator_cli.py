"""The operator's CLI: `--version`, the connection options (TLS and mutual TLS) against a real
server, `--all`/`--json` on listings, and
`memoryd token issue` minting through a server with an admin token instead of the signing key.
(Help on every option and the same connection options everywhere: tests/domain/test_cli_help.py.)"""

from __future__ import annotations

import json
import subprocess

import pytest

from ..support import MEMORYD, ROOT, Agent, full_view, put_view, server_env, token_for, unique
from ..support_tls import Authority

def _run(*args: str, env: dict[str, str] | None = None, **overrides: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MEMORYD, *args], cwd=ROOT, env=env or server_env(**overrides), capture_output=True,
                          text=True, timeout=120)


def test_version():
    result = _run("--version")
    assert result.returncode == 0 and result.stdout.startswith("memoryd ") and "memoryd.v1" in result.stdout


def test_token_issue_mints_through_the_server_with_an_admin_token(server, channel, key_file, tenant, tmp_path):
    admin = token_for(key_file, tenant, "ops-admin", roles=("admin", "agent"), ttl_seconds=3600)
    put_view(channel, key_file, tenant, full_view("payment-agent"))
    # No signing key in this environment: only the address and the admin token.
    env = server_env(MEMORYD_ADDR=server.target, MEMORYD_ADMIN_TOKEN=admin, MEMORYD_DATA_DIR=str(tmp_path))
    result = _run("token", "issue", "--agent", "payment-agent", "--ttl", "10m", "--reason", "onboarding", env=env)
    assert result.returncode == 0, result.stderr
    minted = result.stdout.strip()
    Agent(channel, minted).recall_keys("alice", "drink")
    described = _run("token", "issue", "--agent", "support-bot", "--subject", "alice", "--json", env=env)
    assert described.returncode == 0, described.stderr
    answer = json.loads(described.stdout)
    assert (answer["tenant"], answer["agent"], answer["subject"], answer["roles"]) == (
        tenant, "support-bot", "alice", ["TOKEN_ROLE_AGENT"])
    # An agent token mints nothing: one error line and a hint.
    agent_env = dict(env, MEMORYD_ADMIN_TOKEN=token_for(key_file, tenant, "payment-agent"))
    refused = _run("token", "issue", "--agent", "x", env=agent_env)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith("memoryd: error: PERMISSION_DENIED:")
    # Past the admin token's own expiry: the field is named.
    too_long = _run("token", "issue", "--agent", "x", "--ttl", "2h", env=env)
    assert too_long.returncode == 1 and "  lifetime: must end by the expiry" in too_long.stderr


def test_token_issue_with_a_tenant_still_signs_with_the_key_file(server, tenant):
    result = _run("token", "issue", "--tenant", tenant, "--agent", "boot-admin", "--role", "admin", "--json",
                  env=server.env)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert (answer["tenant"], answer["roles"]) == (tenant, ["TOKEN_ROLE_ADMIN"])


def test_view_all_walks_every_page(server, channel, key_file, tenant):
    put_view(channel, key_file, tenant, full_view("agent-1"))
    token = token_for(key_file, tenant)
    for i in range(5):
        assert _run("write", "--addr", server.target, "--token", token, "--subject", "alice", "--category", "event",
                    "--text", f"event number {i}", env=server.env).returncode == 0
    page = json.loads(_run("view", "--addr", server.target, "--token", token, "--subject", "alice",
                           "--page-size", "2", env=server.env).stdout)
    assert len(page["memories"]) == 2 and page["next_page_token"]
    every = _run("view", "--addr", server.target, "--token", token, "--subject", "alice", "--page-size", "2",
                 "--all", env=server.env)
    assert every.returncode == 0, every.stderr
    listing = json.loads(every.stdout)
    assert len(listing["memories"]) == 5 and "next_page_token" not in listing


def _pem_files(tmp_path, ca: Authority, tenant: str, agent: str) -> dict[str, str]:
    issued = ca.agent(tenant, agent)
    (tmp_path / f"{agent}.pem").write_bytes(issued.cert_pem)
    (tmp_path / f"{agent}-key.pem").write_bytes(issued.key_pem)
    return {"cert": str(tmp_path / f"{agent}.pem"), "key": str(tmp_path / f"{agent}-key.pem")}


def test_the_cli_speaks_tls_and_mutual_tls(tls_server, ca, key_file, tmp_path):
    """Against a server that requires client certificates: every client command with the
    shared options, the variables instead of the flags, and the one-line error without them."""
    tenant = unique("tenant")
    ca_file = tls_server.env["MEMORYD_TLS_CLIENT_CA_FILE"]
    admin_pem = _pem_files(tmp_path, ca, tenant, "ops-admin")
    agent_pem = _pem_files(tmp_path, ca, tenant, "payment-agent")
    admin_token = token_for(key_file, tenant, "ops-admin", roles=("admin",), ttl_seconds=3600)
    tls = ["--addr", tls_server.target, "--tls-ca", str(ca_file), "--tls-server-name", "localhost"]
    as_admin = [*tls, "--tls-cert", admin_pem["cert"], "--tls-key", admin_pem["key"], "--token", admin_token]
    base = server_env(MEMORYD_DATA_DIR=str(tmp_path / "cli"))

    views = tmp_path / "views.yaml"
    views.write_text("views:\n  payment-agent:\n    read: {'*': ['*']}\n    write: {'*': ['*']}\n    fields: '*'\n")
    applied = _run("views", "apply", str(views), *as_admin, env=base)
    assert applied.returncode == 0, applied.stderr
    listed = _run("views", "list", "--json", *as_admin, env=base)
    assert listed.returncode == 0 and [v["agent"] for v in json.loads(listed.stdout)["views"]] == ["payment-agent"]

    # The agent's certificate names it: no token needed.
    as_agent = [*tls, "--tls-cert", agent_pem["cert"], "--tls-key", agent_pem["key"]]
    wrote = _run("write", *as_agent, "--token-file", str(tmp_path / "none"), "--subject", "alice", "--category",
                 "preference", "--key", "drink", "--text", "tea", env=base)
    assert wrote.returncode == 0, wrote.stderr
    # The same through the variables.
    env = dict(base, MEMORYD_ADDR=tls_server.target, MEMORYD_TLS_CA=str(ca_file), MEMORYD_TLS_SERVER_NAME="localhost",
               MEMORYD_TLS_CLIENT_CERT=agent_pem["cert"], MEMORYD_TLS_CLIENT_KEY=agent_pem["key"])
    recalled = _run("recall", "--subject", "alice", "--key", "drink", "--token-file", str(tmp_path / "none"), env=env)
    assert recalled.returncode == 0, recalled.stderr
    assert json.loads(recalled.stdout)["memories"][0]["memory"]["text"] == "tea"
    assert _run("view", "--subject", "alice", "--all", "--token-file", str(tmp_path / "none"), env=env).returncode == 0

    # Token issuance through the TLS server, by the admin (its certificate and its token agree).
    minted = _run("token", "issue", "--agent", "payment-agent", "--ttl", "5m", *as_admin, env=base)
    assert minted.returncode == 0, minted.stderr
    with_token = _run("recall", *as_agent, "--token", minted.stdout.strip(), "--subject", "alice", "--key", "drink",
                      env=base)
    assert with_token.returncode == 0, with_token.stderr

    exported = _run("export", *as_agent, "--token-file", str(tmp_path / "none"), "--subject", "alice", "--out",
                    str(tmp_path / "alice.mda"), env=base)
    assert exported.returncode == 0, exported.stderr

    health = _run("health", *tls, "--tls-cert", agent_pem["cert"], "--tls-key", agent_pem["key"], "--json", env=base)
    assert health.returncode == 0 and json.loads(health.stdout)["status"] == "SERVING", health.stderr

    # Without TLS options the server cannot be spoken to: one error line and a hint.
    plain = _run("recall", "--addr", tls_server.target, "--token", admin_token, "--subject", "alice", env=base)
    assert plain.returncode == 1 and plain.stderr.startswith("memoryd: error: UNAVAILABLE")
    assert "--tls-ca" in plain.stderr.splitlines()[1]
    # Half a client certificate is refused before any call.
    half = _run("recall", *tls, "--tls-cert", agent_pem["cert"], "--token", "t", "--subject", "alice", env=base)
    assert half.returncode == 2
    assert half.stderr.strip().splitlines()[0] == "memoryd: error: mutual TLS needs both --tls-cert and --tls-key"


@pytest.mark.parametrize("command", ["write", "views list", "token issue --agent a", "export --subject s"])
def test_tls_server_name_without_tls_is_refused(command):
    result = _run(*command.split(), "--tls-server-name", "x", "--token", "t")
    assert result.returncode == 2 and "--tls-server-name needs TLS" in result.stderr


def test_audit_verify_and_lifecycle_counts_print_json(server, channel, key_file, tenant):
    put_view(channel, key_file, tenant, full_view("agent-1"))
    token = token_for(key_file, tenant)
    assert _run("write", "--addr", server.target, "--token", token, "--subject", "alice", "--text", "x",
                env=server.env).returncode == 0
    verified = _run("audit", "verify", "--tenant", tenant, "--json", env=server.env)
    assert verified.returncode == 0, verified.stderr
    report = json.loads(verified.stdout)
    assert report["intact"] is True and report["events"] >= 2 and report["broken_at"] is None
    counts = _run("lifecycle", "counts", "--tenant", tenant, "--json", env=server.env)
    assert counts.returncode == 0, counts.stderr
    assert all(isinstance(v, int) for v in json.loads(counts.stdout).values())


def test_bench_locomo_speaks_mutual_tls_to_a_running_server(tls_server, ca, key_file, tmp_path):
    from ..domain.test_bench_locomo import synthetic_locomo

    tenant = unique("tenant")
    dataset = tmp_path / "locomo.json"
    dataset.write_text(json.dumps(synthetic_locomo()))
    admin_pem, bench_pem = _pem_files(tmp_path, ca, tenant, "ops-admin"), _pem_files(tmp_path, ca, tenant, "bench")
    tls = ["--addr", tls_server.target, "--tls-ca", tls_server.env["MEMORYD_TLS_CLIENT_CA_FILE"], "--tls-server-name",
           "localhost"]
    views = tmp_path / "views.yaml"
    views.write_text("views:\n  bench:\n    read: {'*': ['*']}\n    write: {'*': ['*']}\n    fields: '*'\n")
    base = server_env(MEMORYD_DATA_DIR=str(tmp_path / "cli"))
    applied = _run("views", "apply", str(views), *tls, "--tls-cert", admin_pem["cert"], "--tls-key", admin_pem["key"],
                   "--token", token_for(key_file, tenant, "ops-admin", roles=("admin",)), env=base)
    assert applied.returncode == 0, applied.stderr
    out = tmp_path / "results.json"
    ran = _run("bench", "locomo", "--dataset", str(dataset), "--conversations", "1", *tls, "--tls-cert",
               bench_pem["cert"], "--tls-key", bench_pem["key"], "--token", token_for(key_file, tenant, "bench"),
               "--batch-size", "3", "--no-progress", "--json", str(out), env=base)
    assert ran.returncode == 0, ran.stderr
    server = json.loads(out.read_text())["server"]
    assert (server["embedded"], server["addr"], server["tls"]) == (False, tls_server.target, True)
