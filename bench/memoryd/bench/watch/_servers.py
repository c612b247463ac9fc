"""The servers ``memoryd bench watch`` watches and writes through: one embedded server
(``--replicas 1``), the distributed lane's shape (``--replicas 2``), or servers already running
(``--addr``).

``--replicas 2`` starts what tests/distributed starts, with the suite's own code
(``tests/support_distributed.py``, so there is one way to start it): Debian's PostgreSQL server
with the least-privilege logins, the Milvus standalone server of
``scripts/install-test-servers.sh`` with its own compaction defaults, as an operator runs it,
two ``memoryd serve`` replicas without an in-process worker and one ``memoryd worker``. So it
runs only from a source checkout whose ``.build/milvus-server`` exists.
"""

from __future__ import annotations

import contextlib
import importlib
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._locomo import BenchError
from .._proc import children, cpu_seconds, resident, using
from .._server import EmbeddedServer


@dataclass
class Servers:
    """Watchers call ``watch_target``, the writer ``write_target`` (another replica when there
    are two); ``key_path`` signs the run's tokens."""

    watch_target: str
    write_target: str
    key_path: Path
    shape: dict[str, Any]
    pids: dict[str, int] = field(default_factory=dict)  # role -> process id, for resident sizes and CPU
    data_dir: Path | None = None  # an embedded server's, to find its PostgreSQL
    postgres_dir: Path | None = None  # what PostgreSQL's processes name on their command lines

    def resident_bytes(self) -> dict[str, int | None]:
        sizes: dict[str, int | None] = {}
        for role, pid in self.pids.items():
            own, tree = resident(pid, self.data_dir)
            sizes[role] = own
            if self.data_dir is not None:
                sizes[f"{role}_with_children"] = tree
        return sizes

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds used so far by each process of ``pids`` and by PostgreSQL's processes
        (those running now: a backend that ended meanwhile is not counted; the servers' pools
        keep theirs)."""
        used = {role: cpu_seconds(pid) or 0.0 for role, pid in self.pids.items()}
        if self.postgres_dir is not None:
            # The postmaster names its data directory; its backends (children) name their database.
            ours = set(self.pids.values())
            postmasters = [pid for pid in using(self.postgres_dir) if pid not in ours]
            backends = {child for pid in postmasters for child in children(pid)}
            used["postgres"] = sum(cpu_seconds(pid) or 0.0 for pid in {*postmasters, *backends})
        return used


@contextlib.contextmanager
def embedded(environment: Mapping[str, str], config_file: Path | None, start_timeout: float) -> Iterator[Servers]:
    with EmbeddedServer(start_timeout=start_timeout, environment=dict(environment), config_file=config_file) as server:
        pids = {"server": server.pid} if server.pid is not None else {}
        yield Servers(server.target, server.target, server.signing_key_path,
                      {"replicas": 1, "kind": "embedded (PostgreSQL and Milvus Lite started by the server)"},
                      pids, server.data_dir, server.data_dir)


def existing(addrs: tuple[str, ...], key_file: Path) -> Servers:
    if not key_file.is_file():
        raise BenchError("--addr needs --key-file: the servers' signing key, to store the run's views")
    return Servers(addrs[0], addrs[-1], key_file, {"replicas": len(addrs), "kind": "external",
                                                   "addrs": list(addrs)})


def _suite_support() -> Any:
    """tests/support_distributed.py of the checkout this package was installed from."""
    root = Path(__file__).resolve().parents[4]
    if not (root / "tests" / "support_distributed.py").is_file():
        raise BenchError("--replicas 2 starts the distributed lane's servers with the test suite's code: run it "
                         f"from a source checkout (tests/support_distributed.py is not under {root})")
    if not (root / ".build" / "milvus-server" / "bin" / "python").exists():
        raise BenchError(f"the Milvus server is missing ({root}/.build/milvus-server): run "
                         "scripts/install-test-servers.sh")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module("tests.support_distributed")


@contextlib.contextmanager
def distributed(environment: Mapping[str, str], config_file: Path | None, say: Any) -> Iterator[Servers]:
    support = _suite_support()
    root = Path(tempfile.mkdtemp(prefix="memoryd-bench-watch-"))
    postgres = milvus = deployment = None
    try:
        say("starting PostgreSQL and the Milvus server")
        postgres = support.ExternalPostgres().start()
        # Milvus's own compaction defaults (an operator's), and etcd ports of its own so a test
        # run's Milvus on the same machine is not disturbed.
        milvus = support.MilvusStandalone(compaction_check_interval=None, own_etcd_ports=True).start()
        owner_dsn = postgres.create_owner_database("memoryd_bench_watch")
        (root / "keys").mkdir(mode=0o700)
        deployment = support.Deployment(postgres, milvus, owner_dsn, root / "keys", root)
        done = deployment.migrate()
        if done.returncode != 0:
            raise BenchError(f"memoryd migrate failed: {done.stderr[-2000:]}")
        say("starting two replicas and a worker")
        overrides = dict(environment)
        if config_file is not None:
            overrides["MEMORYD_CONFIG"] = str(config_file.resolve())
        watched = deployment.start_replica(**overrides)  # the first creates the shared keys
        written = deployment.start_replica(**overrides)
        worker = deployment.start_worker(**overrides)
        pids = {name: proc.process.pid for name, proc in
                (("watched_replica", watched), ("written_replica", written), ("worker", worker))}
        yield Servers(watched.target, written.target, root / "keys" / "signing.pem",
                      {"replicas": 2, "kind": "distributed lane (PostgreSQL server, Milvus standalone server, "
                                              "two replicas, one worker)"}, pids, postgres_dir=postgres.data)
    finally:
        if deployment is not None:
            deployment.stop_all()
        if milvus is not None:
            milvus.destroy()
        if postgres is not None:
            postgres.destroy()
        shutil.rmtree(root, ignore_errors=True)
