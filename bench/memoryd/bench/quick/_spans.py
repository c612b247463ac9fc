"""What the quick benchmark reads of the server's spans: each LoCoMo Recall under its own W3C
trace id, the console exporter's spans collected, and the service overhead (a Recall minus its
``memoryd.embed`` span) per call.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any


from ..load import (
    latency,
)
from .._trace import new_trace_id


EMBED_SPAN = "memoryd.embed"


RECALL_SPAN = "memoryd.v1.MemoryService/Recall"


class SpanCollector:
    """Reads the JSON spans that OpenTelemetry's ``ConsoleSpanExporter`` prints (one indented
    object per span, ``{`` and ``}`` alone on their lines) and keeps each span's name, start and
    end (s) by trace id, in the order they were printed. Thread-safe: ``feed`` runs on the
    thread that drains the server."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._spans: dict[str, list[tuple[str, float, float]]] = {}
        self._lock = threading.Lock()
        self.unreadable = 0

    def feed(self, line: str) -> None:
        if not self._lines and line.rstrip("\r\n") != "{":
            return  # the server's other output (where its data lives, its tokens)
        self._lines.append(line)
        if line.rstrip("\r\n") != "}":
            return
        text, self._lines = "".join(self._lines), []
        try:
            span = json.loads(text)
            trace_id = str(span["context"]["trace_id"]).removeprefix("0x")
            timed = (str(span["name"]), _instant(span["start_time"]), _instant(span["end_time"]))
        except (ValueError, KeyError, TypeError):
            self.unreadable += 1
            return
        with self._lock:
            self._spans.setdefault(trace_id, []).append(timed)

    def spans(self, trace_id: str) -> dict[str, float]:
        """Each span's duration in ms by name (of two spans of one name, the later printed)."""
        return {name: (end - start) * 1000 for name, start, end in self.timed(trace_id)}

    def timed(self, trace_id: str) -> list[tuple[str, float, float]]:
        """Each span of the trace: (name, start, end), times in seconds since the epoch."""
        with self._lock:
            return list(self._spans.get(trace_id, []))

    def wait_for(self, trace_ids: Sequence[str], name: str, timeout: float) -> int:
        """Wait until every trace has a span called ``name`` (the RPC's span ends last, so its
        children are in by then); returns how many are still missing after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                missing = sum(1 for t in trace_ids if all(span[0] != name for span in self._spans.get(t, [])))
            if not missing or time.monotonic() > deadline:
                return missing
            time.sleep(0.1)


def _instant(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


class Traceparents:
    """A fresh W3C trace id per call: ``next()`` returns it (for ``run_locomo``'s ``recall_trace``,
    which makes the call inside ``_trace.traced``), ``ids`` are the trace ids in order."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def next(self) -> str:
        trace_id = new_trace_id()
        self.ids.append(trace_id)
        return trace_id


def overhead(latencies_ms: Sequence[float], trace_ids: Sequence[str],
             spans: Callable[[str], Mapping[str, float]]) -> dict[str, Any]:
    """Per call: client latency − that call's ``memoryd.embed`` span, and the server's own RPC
    span − embed (no transport); calls without an embed span (keyword-only) are counted apart."""
    client: list[float] = []
    server: list[float] = []
    embed: list[float] = []
    without = 0
    for ms, trace_id in zip(latencies_ms, trace_ids):
        found = spans(trace_id)
        if EMBED_SPAN not in found:
            without += 1
            continue
        embed.append(found[EMBED_SPAN])
        client.append(ms - found[EMBED_SPAN])
        if RECALL_SPAN in found:
            server.append(found[RECALL_SPAN] - found[EMBED_SPAN])
    return {"client_minus_embed_ms": latency(client), "server_span_minus_embed_ms": latency(server),
            "embed_span_ms": latency(embed), "calls_without_embed_span": without}
