"""The TypeScript client (clients/typescript) installs from its lock file, builds with tsc and passes
its own tests (node --test, against a gRPC server on loopback). No Node means failure, never a skip.

And it installs as npm users install packages: ``npm pack`` ships the library alone, and a fresh
project installs it from the tarball or from a clean copy of the folder (``prepare`` builds it)
and runs the package README's hello program against a real memoryd."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from ..support_tls import Authority
from ..support import ServerProcess, full_view, put_view, unique

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"
# Only what npm's cache does not already hold is fetched; the versions are the package's own
# lock file's, so a run after `npm ci` here needs no network.
NPM_ENV = {**os.environ, "npm_config_prefer_offline": "true", "npm_config_audit": "false",
           "npm_config_fund": "false", "npm_config_update_notifier": "false"}


def _npm(*args: str, cwd: Path = PACKAGE, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    npm = shutil.which("npm")
    assert npm and shutil.which("node"), "node and npm are needed for the TypeScript client (Node 20+)"
    return subprocess.run([npm, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=NPM_ENV)


def _node(script: Path, timeout: int = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([shutil.which("node") or "node", str(script)], cwd=script.parent, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package as `npm pack` makes it; packing runs the package's prepare script, which builds
    dist/ from a clean slate, so this is the build every other test uses too."""
    lock, installed = PACKAGE / "package-lock.json", PACKAGE / "node_modules" / ".package-lock.json"
    if not installed.exists() or lock.stat().st_mtime > installed.stat().st_mtime:
        run = _npm("ci", "--ignore-scripts")  # the pack below builds
        assert run.returncode == 0, run.stdout + run.stderr
    out = tmp_path_factory.mktemp("pack")
    run = _npm("pack", "--json", "--pack-destination", str(out))
    assert run.returncode == 0, f"npm pack (tsc) failed:\n{run.stdout}{run.stderr}"
    [packed] = json.loads(run.stdout[run.stdout.index("["):])
    return out / packed["filename"]


@pytest.fixture(scope="module")
def built(tarball: Path) -> None:
    """dist/ is built (by the pack's prepare script)."""


def test_the_typescript_client_builds(built: None):
    assert (PACKAGE / "dist" / "index.js").exists()
    assert (PACKAGE / "dist" / "index.d.ts").exists()
    # The tests and the conformance runner build into build/ (tsconfig.dev.json), never into dist/.
    assert not list((PACKAGE / "dist").glob("**/*test*")) and not list((PACKAGE / "dist").glob("**/conformance*"))


def test_the_typescript_client_passes_its_tests(built: None):
    run = _npm("test", timeout=300)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "# fail 0" in run.stdout
    # The policy test ran: it reads clients/conformance/policy.json and counts attempts per method.
    for suite in ("policy.json", "attempts per method against a server that answers UNAVAILABLE", "token provider",
                  "page iterators", "trace context", "deadlines"):
        assert re.search(rf"^ok \d+ - {re.escape(suite)}$", run.stdout, re.MULTILINE), suite


def test_the_readme_example_runs(built: None, server, connect, tmp_path: Path):
    """The TypeScript example of docs/clients.md, run as written against a real memoryd (only the token
    file and the package import point at this checkout)."""
    from memoryd.v1 import memory_pb2 as pb

    rules = [pb.ViewRule(category=pb.CATEGORY_FACT, key_patterns=["home_city"])]
    agent = connect("demo-agent", view=full_view("demo-agent", read_rules=rules, write_rules=rules))
    page = (ROOT / "docs" / "clients.md").read_text()
    example = page.split("\n## TypeScript client\n", 1)[1].split("```typescript\n", 1)[1].split("```", 1)[0]
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


# --- packaging: as a user of npm gets the client ------------------------------------------------

HELLO_VIEW_KEYS = ["home_city"]


def _hello(server: ServerProcess, token_file: Path) -> str:
    """The package README's hello program, as written, pointed at this server and token file."""
    readme = (PACKAGE / "README.md").read_text()
    example = readme.split("## Hello", 1)[1].split("```typescript\n", 1)[1].split("```", 1)[0]
    assert ".memoryd/tokens/demo-agent.token" in example and "127.0.0.1:50051" in example
    return (example.replace(".memoryd/tokens/demo-agent.token", str(token_file))
            .replace("127.0.0.1:50051", server.target))


def _check_hello(run: subprocess.CompletedProcess[str]) -> None:
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[:2] == ["Lyon", "home_city Lyon"], run.stdout
    code, reason, request_id = lines[2].split(" ")
    assert (code, reason) == ("PERMISSION_DENIED", "VIEW_DENIED") and request_id


@pytest.fixture
def token_file(connect, tmp_path: Path) -> Path:
    """An agent whose view reads and writes only home_city facts (so the hello's iban recall is denied)."""
    from memoryd.v1 import memory_pb2 as pb

    rules = [pb.ViewRule(category=pb.CATEGORY_FACT, key_patterns=HELLO_VIEW_KEYS)]
    agent = connect("hello-agent", view=full_view("hello-agent", read_rules=rules, write_rules=rules))
    path = tmp_path / "hello-agent.token"
    path.write_text(agent.token + "\n")
    return path


def test_the_package_ships_the_library_alone(tarball: Path):
    with tarfile.open(tarball) as archive:
        names = sorted(archive.getnames())
    assert {n for n in names if not n.startswith("package/dist/")} == \
        {"package/package.json", "package/README.md", "package/LICENSE"}
    built = {n.removeprefix("package/") for n in names if n.startswith("package/dist/")}
    assert all(n.endswith((".js", ".d.ts")) for n in built), built
    assert {"dist/index.js", "dist/index.d.ts", "dist/client.js", "dist/policy.js", "dist/tracing.js",
            "dist/langgraph/index.js", "dist/langgraph/index.d.ts"} <= built
    assert not [n for n in built if "test" in n or "conformance" in n], built
    manifest = json.loads((PACKAGE / "package.json").read_text())
    assert manifest["license"] == "Apache-2.0" and manifest["repository"]["directory"] == "clients/typescript"
    assert manifest["peerDependenciesMeta"]["@opentelemetry/api"]["optional"] is True
    # @memoryd/client/langgraph needs LangGraph.js, which only its users install.
    assert manifest["peerDependenciesMeta"]["@langchain/langgraph-checkpoint"]["optional"] is True
    assert manifest["exports"]["./langgraph"]["import"] == "./dist/langgraph/index.js"


def test_a_fresh_typescript_project_installs_the_tarball_and_says_hello(tarball: Path, server: ServerProcess,
                                                                         token_file: Path, tmp_path: Path):
    """npm install <tarball>: the README's hello type-checks under strict settings against the
    shipped .d.ts, then runs (without @opentelemetry/api installed)."""
    project = tmp_path / "consumer"
    project.mkdir()
    (project / "package.json").write_text(json.dumps({"name": "consumer", "private": True, "type": "module"}))
    run = _npm("install", str(tarball), cwd=project, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert not (project / "node_modules" / "@opentelemetry").exists()
    assert not (project / "node_modules" / "@langchain").exists()
    # The package's own compiler and Node types (a TypeScript project has its own; installing them
    # again here would only cost time); @memoryd/client and its dependencies resolve from the project.
    (project / "tsconfig.json").write_text(json.dumps({"compilerOptions": {
        "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext", "strict": True,
        "skipLibCheck": True, "typeRoots": [str(PACKAGE / "node_modules" / "@types")], "types": ["node"], "outDir": "out"},
        "include": ["hello.ts"]}))
    (project / "hello.ts").write_text(_hello(server, token_file))
    tsc = PACKAGE / "node_modules" / "typescript" / "bin" / "tsc"
    run = subprocess.run([shutil.which("node") or "node", str(tsc), "-p", "."], cwd=project, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, f"the README's hello does not type-check:\n{run.stdout}{run.stderr}"
    _check_hello(_node(project / "out" / "hello.js"))


def test_a_fresh_project_installs_a_clean_checkout_of_the_folder(server: ServerProcess, token_file: Path,
                                                                  tmp_path: Path):
    """npm install <folder> on a folder as a fresh clone has it (no node_modules, no dist): the
    package's prepare script installs its build tools and builds dist/, and the hello runs."""
    source = tmp_path / "memoryd" / "clients" / "typescript"
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("node_modules", "dist", "build", "*.tgz"))
    project = tmp_path / "consumer"
    project.mkdir()
    (project / "package.json").write_text(json.dumps({"name": "consumer", "private": True, "type": "module"}))
    run = _npm("install", str(source), cwd=project, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (source / "dist" / "index.js").exists() and (source / "dist" / "index.d.ts").exists()
    (project / "hello.mjs").write_text(_hello(server, token_file))
    _check_hello(_node(project / "hello.mjs"))
