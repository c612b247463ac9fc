"""The Go client (clients/go) vets clean, passes its own tests (go test, against an in-process
gRPC server), keeps a watch through cut connections to a real server, and installs into a fresh
module the way its README says. Modules come from go.sum through the Go module proxy; the Go
build cache keeps reruns fast. No Go toolchain means failure, never a skip."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import grpc

from ..support import ServerProcess, full_view, put_view, token_for, unique

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "clients" / "go"


def _go(*args: str) -> subprocess.CompletedProcess[str]:
    go = shutil.which("go")
    assert go, "the Go toolchain (go 1.26+) is needed for the Go client"
    return subprocess.run([go, *args], cwd=MODULE, capture_output=True, text=True, timeout=900)


def test_go_vet_is_clean():
    run = _go("vet", "./...")
    assert run.returncode == 0, run.stdout + run.stderr


def test_go_tests_pass():
    run = _go("test", "./...")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ok  \tgithub.com/memoryd/memoryd/clients/go/memoryd" in run.stdout, run.stdout


def test_go_code_is_gofmt_clean():
    gofmt = shutil.which("gofmt")
    assert gofmt, "gofmt comes with the Go toolchain"
    run = subprocess.run([gofmt, "-l", "memoryd", "cmd"], cwd=MODULE, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout == "", f"not gofmt-formatted: {run.stdout}{run.stderr}"


# What a consumer's build may pull in: the client, its stubs and their dependencies — never the
# conformance runner (cmd/), never a test-only module.
ALLOWED_MODULES = {
    "github.com/memoryd/memoryd/clients/go",
    "buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go",  # the buf.validate types the protos import
    "google.golang.org/grpc",
    "google.golang.org/protobuf",
    "google.golang.org/genproto/googleapis/rpc",
    "go.opentelemetry.io/otel",
    "go.opentelemetry.io/otel/trace",
    "github.com/cespare/xxhash/v2",  # otel/attribute's hash
    "golang.org/x/net",
    "golang.org/x/sys",
    "golang.org/x/text",
    "example.com/hello",
}


def _readme_program() -> str:
    readme = (MODULE / "README.md").read_text()
    return readme.split("## Hello", 1)[1].split("```go\n", 1)[1].split("```", 1)[0]


def test_a_fresh_module_builds_the_readme_program_with_replace_and_runs_it(server, connect, tmp_path: Path):
    """Install as clients/go/README.md says (require + replace to this checkout, tidy, vendor),
    build its hello program and run it against a real memoryd: write, recall, walk the pages,
    and a typed error for a key the view does not grant."""
    from memoryd.v1 import memory_pb2 as pb

    go = shutil.which("go")
    assert go, "the Go toolchain (go 1.26+) is needed for the Go client"
    rules = [pb.ViewRule(category=pb.CATEGORY_FACT, key_patterns=["home_city"])]
    agent = connect("demo-agent", view=full_view("demo-agent", read_rules=rules, write_rules=rules))
    token_file = tmp_path / "demo-agent.token"
    token_file.write_text(agent.token + "\n")
    consumer = tmp_path / "hello"
    consumer.mkdir()
    (consumer / "main.go").write_text(_readme_program().replace(".memoryd/tokens/demo-agent.token", str(token_file))
                                      .replace("127.0.0.1:50051", server.target))
    # -trimpath: the module lives in a new temp dir each run, and without it that path is part of
    # every vendored package's build-cache key, so each run compiled them all again (~20 CPU-s).
    env = {**os.environ, "GOWORK": "off", "GOFLAGS": "-buildvcs=false -trimpath"}

    def go_run(*args: str) -> subprocess.CompletedProcess[str]:
        run = subprocess.run([go, *args], cwd=consumer, capture_output=True, text=True, timeout=600, env=env)
        assert run.returncode == 0, f"go {' '.join(args)}:\n{run.stdout}{run.stderr}"
        return run

    # The README's commands, with the checkout's path.
    go_run("mod", "init", "example.com/hello")
    go_run("mod", "edit", "-require=github.com/memoryd/memoryd/clients/go@v0.0.0",
           f"-replace=github.com/memoryd/memoryd/clients/go={MODULE}")
    go_run("mod", "tidy")
    go_run("mod", "vendor")
    vendored = consumer / "vendor" / "github.com" / "memoryd" / "memoryd" / "clients" / "go"
    assert sorted(p.name for p in vendored.iterdir() if p.is_dir()) == ["gen", "memoryd"], "cmd/ was vendored"
    assert (vendored / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
    go_run("build", "-mod=vendor", "-o", "hello", ".")

    modules = go_run("list", "-mod=vendor", "-deps", "-f", "{{if not .Standard}}{{.Module.Path}}{{end}}", ".")
    assert set(filter(None, modules.stdout.split())) <= ALLOWED_MODULES, modules.stdout

    run = subprocess.run([str(consumer / "hello")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[:2] == ["Lyon", "home_city Lyon"], run.stdout
    code, reason, request_id = lines[2].split(" ")
    assert (code, reason) == ("PERMISSION_DENIED", "VIEW_DENIED") and request_id


def test_the_go_watcher_resumes_against_a_real_server(fast_heartbeat_server: ServerProcess, key_file: Path):
    """The Go Watcher against the real server through a relay its test cuts: a dropped
    connection and then a silent one, each change committed meanwhile arriving once, in order
    (memoryd/realserver_test.go)."""
    tenant = unique("tenant")
    with grpc.insecure_channel(fast_heartbeat_server.target) as channel:
        put_view(channel, key_file, tenant, full_view("go-watcher"))
    env = {**os.environ, "MEMORYD_TEST_TARGET": fast_heartbeat_server.target,
           "MEMORYD_TEST_TOKEN": token_for(key_file, tenant, "go-watcher"), "MEMORYD_TEST_HEARTBEAT": "1s"}
    go = shutil.which("go")
    assert go, "the Go toolchain (go 1.26+) is needed for the Go client"
    run = subprocess.run([go, "test", "-count=1", "-v", "-run", "^TestAWatchOnARealServer", "./memoryd"], cwd=MODULE,
                         capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "--- PASS: TestAWatchOnARealServerResumesWithNothingLostOrRepeated" in run.stdout, run.stdout
