"""The distributed shape, for real: Debian's PostgreSQL server with a non-superuser CREATEROLE
owner and password logins over TCP, a Milvus standalone server (the PyPI package ``milvus``)
over the network, server replicas without an in-process worker and separate ``memoryd
worker`` processes. ``scripts/install-test-servers.sh`` installs both servers (``make test``
runs it first)."""

from __future__ import annotations

import glob
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from .support import MEMORYD, ROOT, ServerProcess, free_port, server_env, wait_until

MILVUS_PYTHON = ROOT / ".build" / "milvus-server" / "bin" / "python"
OWNER, OWNER_PASSWORD = "memoryd_owner", "owner-Secret-1"
APP_PASSWORD, WORKER_PASSWORD = "app-Secret-2", "worker-Secret-3"


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise RuntimeError("Debian's PostgreSQL server is missing: run scripts/install-test-servers.sh")
    return found[-1]


class ExternalPostgres:
    """A PostgreSQL cluster of Debian's server binaries on a loopback TCP port with SCRAM
    passwords. Its superuser is reachable only over its private Unix socket; memoryd gets an
    owner that is NOT a superuser — only LOGIN CREATEROLE and the database's ownership."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="memoryd-pg15-"))
        self.root.chmod(0o755)
        self.data, self.sockets, self.log = self.root / "data", self.root / "sockets", self.root / "postgres.log"
        self.port = free_port()
        self._as_user: list[str] = []
        if os.geteuid() == 0:  # postgres refuses to run as root
            self._as_user = ["runuser", "-u", "postgres", "--"]
            uid, gid = pwd.getpwnam("postgres").pw_uid, pwd.getpwnam("postgres").pw_gid
            for path in (self.data, self.sockets):
                path.mkdir()
                os.chown(path, uid, gid)
            self.log.touch()
            os.chown(self.log, uid, gid)
        else:
            self.data.mkdir()
            self.sockets.mkdir()

    def _run(self, *cmd: str) -> None:
        subprocess.run([*self._as_user, *cmd], check=True, capture_output=True, text=True)

    def start(self) -> ExternalPostgres:
        if not (self.data / "PG_VERSION").exists():
            self._run(_pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth-local=trust",
                      "--auth-host=scram-sha-256", "-E", "UTF8", "--no-instructions")
        options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.sockets} -c fsync=off "
                   "-c max_connections=200 -c password_encryption=scram-sha-256")
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")
        return self

    def stop(self, mode: str = "fast") -> None:
        subprocess.run([*self._as_user, _pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"],
                       capture_output=True)

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def superuser_dsn(self) -> str:
        return f"host={self.sockets} port={self.port} user=postgres dbname=postgres"

    def dsn(self, user: str, password: str, dbname: str) -> str:
        return f"postgresql://{user}:{password}@127.0.0.1:{self.port}/{dbname}?connect_timeout=5"

    def create_owner_database(self, dbname: str) -> str:
        """A database owned by a CREATEROLE-only login (what deploy/k8s/postgres-cluster.yaml
        and deploy/compose.yaml set up); returns its owner DSN."""
        with psycopg.connect(self.superuser_dsn, autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (OWNER,)).fetchone()
            if not exists:
                conn.execute(f"CREATE ROLE {OWNER} LOGIN CREATEROLE NOSUPERUSER NOBYPASSRLS "
                             f"PASSWORD '{OWNER_PASSWORD}'")
            conn.execute(f"CREATE DATABASE {dbname} OWNER {OWNER}")
            # PostgreSQL 15 leaves CREATE on schema public to its owner only; nothing else needed.
        return self.dsn(OWNER, OWNER_PASSWORD, dbname)


def _bindable(port: int) -> bool:
    """Whether ``port`` can be bound on loopback the way the Milvus launcher binds it."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class MilvusStandalone:
    """The Milvus 2.3.5 standalone server of the ``milvus`` wheel, in its own process group
    (it ignores SIGTERM, so stop means SIGKILL). Restarted on the same ports and data."""

    # Its port check binds without SO_REUSEADDR, so a restart right after a kill would find
    # the ports "in use" by the old connections' TIME_WAIT; Milvus itself reuses them.
    # A restart binds the same ports again, so none may be in the kernel's ephemeral range
    # (ip_local_port_range, 32768-60999 here), where any process's outgoing connection or
    # port-0 listener could hold it meanwhile: the root coordinator's default, 53100, moves
    # below it.
    # Its data coordinator looks at running compactions every dataCoord.compaction.check.interval
    # (10 s by default) and only then starts the next, one plan per shard (two here), and a
    # collection-wide compaction (what a purge asks for) plans a task per partition it finds
    # worth compacting: after the distributed tests' purges, 35 plans for 42 tenant partitions
    # took over 3 minutes, and each purge's 10 s wait ran out. Checked every second, the same queue drains ten times faster.
    # ``compaction_check_interval=None`` keeps Milvus's own default, as an operator runs it (bench/).
    # Its embedded etcd listens on 2379 and 2380 whatever the wheel's etcd_port says, so a second
    # server on the machine (another test run) panics on them and its health check never answers:
    # ``own_etcd_ports`` gives it ports of its own through an etcd config file (kept on restart).
    _LAUNCH = (
        "import json, socket, sys, milvus\n"
        "def bind(self, port):\n"
        "    sock = socket.socket(); sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "    try:\n"
        "        sock.bind(('127.0.0.1', port)); sock.listen(); return sock\n"
        "    except OSError:\n"
        "        sock.close(); return None\n"
        "milvus.MilvusServerConfig.try_bind_port = bind\n"
        "s = milvus.MilvusServer(); s.set_base_dir(sys.argv[1])\n"
        "anchor = '    indexBasedCompaction: true\\n'\n"
        "assert s.config.template_text.count(anchor) == 1, 'the milvus wheel changed its config template'\n"
        "if sys.argv[4]:\n"
        "    s.config.template_text = s.config.template_text.replace(\n"
        "        anchor, anchor + '    check:\\n      interval: ' + sys.argv[4] + '\\n')\n"
        "if sys.argv[5]:\n"
        "    assert s.config.template_text.count('\\netcd:\\n') == 1, 'the milvus wheel changed its config template'\n"
        "    s.config.template_text = s.config.template_text.replace(\n"
        "        '\\netcd:\\n', '\\netcd:\\n  config:\\n    path: ' + sys.argv[5] + '\\n')\n"
        "for k, item in s.config.configurable_items.items():\n"
        "    if k.endswith('_port') and item[1] and int(item[1]) >= 32768: item[1] = 23100\n"
        "ports = json.loads(sys.argv[3])\n"
        "for k, v in ports.items(): s.config.configs[k] = v\n"
        "s.start()\n"
        "keys = [k for k in s.config.configurable_items if k.endswith('_port')]\n"
        "out = {k: s.config.get(k) for k in keys}; out['webservice_port'] = s.webservice_port\n"
        "open(sys.argv[2], 'w').write(json.dumps(out))\n"
        "s.wait()\n"
    )

    def __init__(self, *, compaction_check_interval: int | None = 1, own_etcd_ports: bool = False) -> None:
        self.compaction_check_interval = compaction_check_interval
        self.own_etcd_ports = own_etcd_ports
        self.root = Path(tempfile.mkdtemp(prefix="memoryd-milvus-"))
        self.ports: dict[str, int] = {}
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.ports['proxy_port']}"

    def start(self, timeout: float = 180.0) -> MilvusStandalone:
        if not MILVUS_PYTHON.exists():
            raise RuntimeError("the Milvus server is missing: run scripts/install-test-servers.sh")
        info = self.root / "ports.json"
        info.unlink(missing_ok=True)
        pinned = {k: v for k, v in self.ports.items() if k not in ("webservice_port", "etcd_peer_port")}
        etcd_config = self._etcd_config() if self.own_etcd_ports else None
        if etcd_config is not None:
            pinned["etcd_port"] = self.ports["etcd_port"]
        with (self.root / "launcher.log").open("ab") as log:
            self.process = subprocess.Popen(
                [str(MILVUS_PYTHON), "-c", self._LAUNCH, str(self.root / "data"), str(info), json.dumps(pinned),
                 "" if self.compaction_check_interval is None else str(self.compaction_check_interval),
                 str(etcd_config or "")],
                stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not info.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                launcher = (self.root / "launcher.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"Milvus did not start; see {self.root}/data/logs. Its launcher said:\n{launcher}")
            time.sleep(0.2)
        peer = self.ports.get("etcd_peer_port")
        self.ports = json.loads(info.read_text())
        if peer:
            self.ports["etcd_peer_port"] = peer
        return self

    def _etcd_config(self) -> Path:
        """The embedded etcd's client and peer ports, below the ephemeral range, chosen once."""
        if "etcd_peer_port" not in self.ports:
            free = (port for port in range(24000, 32000) if _bindable(port) and _bindable(port + 1))
            client = next(free)
            self.ports.update(etcd_port=client, etcd_peer_port=client + 1)
        client, peer = self.ports["etcd_port"], self.ports["etcd_peer_port"]
        path = self.root / "etcd.yaml"
        path.write_text(f"name: default\nlisten-client-urls: http://127.0.0.1:{client}\n"
                        f"advertise-client-urls: http://127.0.0.1:{client}\n"
                        f"listen-peer-urls: http://127.0.0.1:{peer}\ninitial-advertise-peer-urls: http://127.0.0.1:{peer}\n"
                        f"initial-cluster: default=http://127.0.0.1:{peer}\n")
        return path

    def kill(self) -> None:
        """SIGKILL the whole process group: the launcher and the Milvus binary; return once
        its ports can be bound again. Waiting for the launcher is not enough: the binary and
        its embedded etcd die after it, and a restart that binds 2379 meanwhile fails."""
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()
            self.process = None
            wait_until(lambda: all(_bindable(int(port)) for port in self.ports.values() if port), timeout=60, interval=0.2,
                       what="the killed Milvus server's ports are free")

    def destroy(self) -> None:
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)

    def queries(self) -> float:
        """Query requests the server has answered (its own Prometheus counter): the read-backs."""
        return self.requests("Query")

    def requests(self, function: str, status: str = "success") -> float:
        """``function`` requests (Flush, Query, Search, ...) the server has answered with
        ``status`` since it started (its proxy's Prometheus counter; a restart zeroes it)."""
        url = f"http://127.0.0.1:{self.ports['webservice_port']}/metrics"
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        return sum(float(m.group(1)) for m in re.finditer(
            rf'^milvus_proxy_req_count\{{[^}}]*function_name="{re.escape(function)}"[^}}]*'
            rf'status="{re.escape(status)}"[^}}]*\}} (\S+)$', text, re.M))


class WorkerProcess(ServerProcess):
    """A ``memoryd worker`` subprocess (it prints one line once it runs)."""

    def start(self, timeout: float = 90.0) -> WorkerProcess:
        with self.log_path.open("a") as log:
            self.process = subprocess.Popen([*MEMORYD, "worker"], env=self.env, stdout=subprocess.PIPE,
                                            stderr=log, text=True, cwd=self.cwd)
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        for line in self.process.stdout:
            self.output.append(line)
            if "worker running" in line:
                return self
            if time.monotonic() > deadline:
                break
        code = self.process.poll()
        self.stop(signal.SIGKILL)
        raise RuntimeError(f"memoryd worker did not start (exit {code}); log {self.log_path}:\n"
                           + self.log_path.read_text()[-3000:])


@dataclass
class Deployment:
    """One memoryd deployment in the distributed shape: shared keys, least-privilege logins."""

    postgres: ExternalPostgres
    milvus: MilvusStandalone
    owner_dsn: str
    keys: Path
    logs: Path
    replicas: list[ServerProcess] = field(default_factory=list)
    workers: list[WorkerProcess] = field(default_factory=list)

    @property
    def dbname(self) -> str:
        return self.owner_dsn.rsplit("/", 1)[1].split("?")[0]

    @property
    def app_dsn(self) -> str:
        return self.postgres.dsn("memoryd_app", APP_PASSWORD, self.dbname)

    @property
    def worker_dsn(self) -> str:
        return self.postgres.dsn("memoryd_worker", WORKER_PASSWORD, self.dbname)

    def env(self, **overrides: str) -> dict[str, str]:
        """What a server or worker pod gets: its own logins, never the owner's."""
        settings = {
            "MEMORYD_POSTGRES_APP_DSN": self.app_dsn, "MEMORYD_POSTGRES_WORKER_DSN": self.worker_dsn,
            "MEMORYD_MILVUS_URI": self.milvus.uri, "MEMORYD_WORKER_IN_PROCESS": "false",
            "MEMORYD_KEYS_DIR": str(self.keys), "MEMORYD_KEY_FILE": str(self.keys / "master.key"),
            "MEMORYD_DATA_DIR": str(self.logs / "data"), "MEMORYD_VIEW_CACHE_SECONDS": "1"}
        return server_env(**{**settings, **overrides})

    def migrate(self) -> subprocess.CompletedProcess[str]:
        secrets = self.logs / "secrets"
        secrets.mkdir(exist_ok=True)
        (secrets / "app").write_text(APP_PASSWORD + "\n")
        (secrets / "worker").write_text(WORKER_PASSWORD + "\n")
        env = server_env(MEMORYD_POSTGRES_DSN=self.owner_dsn,
                         MEMORYD_POSTGRES_APP_PASSWORD_FILE=str(secrets / "app"),
                         MEMORYD_POSTGRES_WORKER_PASSWORD_FILE=str(secrets / "worker"))
        return subprocess.run([*MEMORYD, "migrate"], env=env, capture_output=True, text=True, timeout=120)

    def start_replica(self, **overrides: str) -> ServerProcess:
        n = len(self.replicas)
        replica = ServerProcess(self.env(**overrides), self.logs / f"replica-{n}.log").start(timeout=120)
        self.replicas.append(replica)
        return replica

    def start_worker(self, **overrides: str) -> WorkerProcess:
        n = len(self.workers)
        worker = WorkerProcess(self.env(**overrides), self.logs / f"worker-{n}.log").start()
        self.workers.append(worker)
        return worker

    def restart_replica(self, n: int) -> ServerProcess:
        """Start replica ``n`` again (after a kill), with the same settings and log."""
        old = self.replicas[n]
        self.replicas[n] = ServerProcess(old.env, old.log_path).start(timeout=120)
        return self.replicas[n]

    def restart_worker(self, n: int) -> WorkerProcess:
        old = self.workers[n]
        self.workers[n] = WorkerProcess(old.env, old.log_path).start()
        return self.workers[n]

    def stop_all(self) -> None:
        for proc in [*self.replicas, *self.workers]:
            proc.stop(signal.SIGKILL, timeout=10)
