"""A one-line progress bar with rate and ETA on a text stream (stderr), redrawn at most ten
times a second. Used by the benchmark and the CLI's long jobs (reindex, lifecycle sweep).

On a terminal the line is redrawn in place; elsewhere (logs, CI) a plain line is written
every 30 seconds and at the end, so captured output stays readable.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import TextIO


class Progress:
    def __init__(self, label: str, total: int, stream: TextIO | None, *, width: int = 28,
                 interactive: bool | None = None, log_every: float = 30.0) -> None:
        self.label = label
        self.total = max(total, 0)
        self.done = 0
        self._stream = stream
        self._width = width
        self._interactive = (stream is not None and stream.isatty()) if interactive is None else interactive
        self._log_every = log_every
        self._started = time.monotonic()
        self._drawn = 0.0 if self._interactive else self._started
        self._closed = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close(failed=kind is not None)

    def advance(self, count: int = 1) -> None:
        self.done += count
        now = time.monotonic()
        if self._interactive and (now - self._drawn >= 0.1 or self.done >= self.total):
            self._drawn = now
            self._write("\r" + self.line())
        elif not self._interactive and now - self._drawn >= self._log_every and self.done < self.total:
            self._drawn = now
            self._write(self.line() + "\n")

    def line(self) -> str:
        fraction = min(self.done / self.total, 1.0) if self.total else 1.0
        filled = int(round(fraction * self._width))
        elapsed = max(time.monotonic() - self._started, 1e-9)
        rate = self.done / elapsed
        # The time left at the rate so far (0 once done; unknown before the first step).
        left = max(self.total - self.done, 0)
        eta = f"{left / rate:,.0f}s" if rate else ("0s" if not left else "?")
        return (f"{self.label} [{'#' * filled}{'.' * (self._width - filled)}] {self.done}/{self.total} "
                f"{rate:,.1f}/s {elapsed:,.0f}s ETA {eta}")

    def close(self, *, failed: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        suffix = " (stopped)" if failed else ""
        self._write(("\r" if self._interactive else "") + self.line() + suffix + "\n")

    def _write(self, text: str) -> None:
        if self._stream is not None:
            self._stream.write(text)
            self._stream.flush()
