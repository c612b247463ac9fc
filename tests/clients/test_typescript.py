"""The TypeScript client (clients/typescript) installs from its lock file, builds with tsc and passes
its own tests (node --test, against a gRPC server on loopback). No Node means failure, never a skip."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ..support_tls import Authority
from ..support import ServerProcess, full_view, put_view, unique

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"


def _npm(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    npm = shutil.which("npm")
    assert npm and shutil.which("node"), "node and npm are needed for the TypeScript client (Node 20+)"
    return subprocess.run([npm, *args], cwd=PACKAGE, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def built() -> None:
    lock, installed = PACKAGE / "package-lock.json", PACKAGE / "node_modules" / ".package-lock.json"
    if not installed.exists() or lock.stat().st_mtime > installed.stat().st_mtime:
        run = _npm("ci", "--no-audit", "--no-fund")
        assert run.returncode == 0, run.stdout + run.stderr
    run = _npm("run", "build")
    assert run.returncode == 0, f"tsc failed:\n{run.stdout}{run.stderr}"
    (PACKAGE / "dist" / ".build-stamp").touch()  # conformance.sh then reuses this build


def test_the_typescript_client_builds(built: None):
    assert (PACKAGE / "dist" / "index.js").exists()
    assert (PACKAGE / "dist" / "index.d.ts").exists()
    assert (PACKAGE / "dist" / "conformance.js").exists()


def test_the_typescript_client_passes_its_tests(built: None):
    run = _npm("test", timeout=300)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "# fail 0" in run.stdout


def test_the_readme_example_runs(built: None, server, connect, tmp_path: Path):
    """The README's TypeScript example, run as written against a real memoryd (only the token
    file and the package import point at this checkout)."""
    from memoryd.v1 import memory_pb2 as pb

    rules = [pb.ViewRule(category=pb.CATEGORY_FACT, key_patterns=["home_city"])]
    agent = connect("demo-agent", view=full_view("demo-agent", read_rules=rules, write_rules=rules))
    readme = (ROOT / "README.md").read_text()
    example = readme.split("### TypeScript client", 1)[1].split("```typescript\n", 1)[1].split("```", 1)[0]
    token_file = tmp_path / "demo-agent.token"
    token_file.write_text(agent.token + "\n")
    script = (example.replace('"@memoryd/client"', f'"{(PACKAGE / "dist" / "index.js").as_uri()}"')
              .replace(".memoryd/tokens/demo-agent.token", str(token_file))
              .replace("127.0.0.1:50051", server.target))
    (tmp_path / "example.mjs").write_text(script)
    run = subprocess.run([shutil.which("node") or "node", str(tmp_path / "example.mjs")], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "Lyon"
    code, reason, request_id = lines[1].split(" ")
    assert (code, reason) == ("PERMISSION_DENIED", "VIEW_DENIED") and request_id


def test_mutual_tls_names_the_caller_without_a_token(built: None, tls_server: ServerProcess, ca: Authority,
                                                     key_file: Path, tmp_path: Path):
    """{tls: {ca, cert, key}} reaches a memoryd that requires client certificates; the certificate's
    SPIFFE id is the caller."""
    import grpc

    tenant = unique("tenant")
    client = ca.agent(tenant, "ts-agent")
    for name, content in {"ca.pem": ca.pem, "cert.pem": client.cert_pem, "key.pem": client.key_pem}.items():
        (tmp_path / name).write_bytes(content)
    credentials = grpc.ssl_channel_credentials(root_certificates=ca.pem, private_key=client.key_pem,
                                               certificate_chain=client.cert_pem)
    with grpc.secure_channel(tls_server.target, credentials,
                             options=[("grpc.ssl_target_name_override", "localhost")]) as admin:
        put_view(admin, key_file, tenant, full_view("ts-agent"), admin_agent="ts-agent")
    script = tmp_path / "mtls.mjs"
    script.write_text(f"""
import {{ readFileSync }} from "node:fs";
import {{ Category, createMemorydClient }} from "{(PACKAGE / "dist" / "index.js").as_uri()}";
const read = (name) => readFileSync("{tmp_path}/" + name);
const memoryd = createMemorydClient({{ target: "{tls_server.target}",
  tls: {{ ca: read("ca.pem"), cert: read("cert.pem"), key: read("key.pem"), serverName: "localhost" }} }});
await memoryd.write({{ subject: "alice", items: [{{ category: Category.FACT, key: "k", text: "over mTLS" }}] }});
const {{ memories }} = await memoryd.recall({{ subject: "alice", keys: ["k"] }});
console.log(memories[0].memory.text, memories[0].memory.provenance.agent);
memoryd.close();
""")
    run = subprocess.run([shutil.which("node") or "node", str(script)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == "over mTLS ts-agent"
