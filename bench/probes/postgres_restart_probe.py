"""How soon a replica answers again after its PostgreSQL restarts (issue 39 item 5: one replica
needed 12.3 s).

Starts Debian's PostgreSQL 15 of tests/support_distributed.py and one replica with the two
least-privilege logins (its index on Milvus Lite: the pool is the subject here, not Milvus),
calls it once every 100 ms (MemoryView: PostgreSQL only), then stops PostgreSQL (`pg_ctl -m
MODE`), leaves it down DOWN seconds, starts it and times, from the moment `pg_ctl -w start`
returns (PostgreSQL accepts connections), the first call that succeeds. Each DOWN of
``--down`` is tried ``--rounds`` times.

    .venv/bin/python bench/probes/postgres_restart_probe.py --down 0 3 8 --rounds 2
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: tests.support

from tests.support import Agent, draft, full_view, put_view, token_for  # noqa: E402
from tests.support_distributed import Deployment, ExternalPostgres  # noqa: E402

from memoryd.v1 import memory_service_pb2 as svc  # noqa: E402


class Caller(threading.Thread):
    """Calls MemoryView every 100 ms; keeps when each call ended and whether it succeeded."""

    def __init__(self, agent: Agent) -> None:
        super().__init__(daemon=True)
        self.agent = agent
        self.results: list[tuple[float, bool]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.agent.call("MemoryView", svc.MemoryViewRequest(subject="alice"), timeout=10)
                ok = True
            except grpc.RpcError:
                ok = False
            self.results.append((time.monotonic(), ok))
            time.sleep(0.1)

    def first_success_after(self, moment: float) -> float:
        while True:
            for ended, ok in list(self.results):
                if ok and ended >= moment:
                    return ended - moment
            time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--down", type=float, nargs="+", default=[0.0, 3.0, 8.0], help="seconds PostgreSQL stays down")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--mode", default="immediate", choices=("fast", "immediate"))
    args = parser.parse_args()
    pg = ExternalPostgres().start()
    root = Path(tempfile.mkdtemp(prefix="memoryd-bench-pgrestart-"))
    lite: Any = SimpleNamespace(uri="")  # no Milvus server: MEMORYD_MILVUS_URI="" is Milvus Lite
    try:
        owner = pg.create_owner_database("bench")
        (root / "keys").mkdir(mode=0o700)
        shape = Deployment(pg, lite, owner, root / "keys", root)
        assert shape.migrate().returncode == 0
        replica = shape.start_replica(MEMORYD_WORKER_IN_PROCESS="true")
        signing = shape.keys / "signing.pem"
        with grpc.insecure_channel(replica.target) as channel:
            put_view(channel, signing, "bench", full_view("agent-1"))
            agent = Agent(channel, token_for(signing, "bench"))
            agent.write("alice", draft("fact", "Alice keeps bees", key="hobby"))
            caller = Caller(agent)
            caller.start()
            time.sleep(2)
            for down in args.down:
                for _ in range(args.rounds):
                    pg.stop(args.mode)
                    time.sleep(down)
                    pg.start()
                    accepting = time.monotonic()
                    waited = caller.first_success_after(accepting)
                    failed = sum(1 for ended, ok in caller.results if not ok and ended >= accepting)
                    print(f"down {down:4.1f} s ({args.mode}): first success {waited:5.2f} s after PostgreSQL "
                          f"accepted connections ({failed} calls failed after that)", flush=True)
                    time.sleep(3)
            caller.stop.set()
            caller.join()
        shape.stop_all()
    finally:
        pg.destroy()


if __name__ == "__main__":
    main()
