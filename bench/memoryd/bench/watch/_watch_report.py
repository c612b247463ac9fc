"""The watch latency run presented: text, a Markdown section for bench/RESULTS.md, and JSON."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from .._report import run_lines
from ._watch import WatchResult


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.1f}"


def _mib(value: int | None) -> str:
    return "?" if value is None else f"{value / 2**20:,.0f} MiB"


def _row(result: WatchResult) -> list[str]:
    t, o, lat = result.tally, result.options, result.tally.latency_ms()
    return [str(result.shape.get("replicas")), str(o.streams), f"{o.rate:g}/s × {o.duration:g} s", str(t.expected()),
            str(t.delivered()), str(t.missing()), str(t.duplicates), str(t.leaks), _ms(lat["p50"]), _ms(lat["p95"]),
            _ms(lat["p99"]), _ms(lat["max"])]


HEADER = ["replicas", "streams", "writes", "expected", "delivered", "missing", "duplicates", "leaks", "p50 ms",
          "p95 ms", "p99 ms", "max ms"]


def facts(result: WatchResult, settings: Mapping[str, str]) -> list[str]:
    t, o = result.tally, result.options
    write, lag = result.write_latency(), result.loop_lag()
    lines = [
        f"servers: {result.shape.get('kind')}; watchers on one, writes through "
        + ("the other" if result.shape.get("replicas", 1) > 1 else "the same"),
        f"{o.streams} streams ({o.streams_per_channel} a channel) of 4 reader agents over {o.subjects} subjects "
        f"(every fifth group of four watches all subjects); {result.writes} writes of one memory each, "
        f"{len(t.failed)} failed",
        f"latency: from just before the Write call to the change's arrival at the reader, per (write, stream "
        f"that should see it); the stream's view hides {t.hidden()} (write, stream) pairs on its subject, "
        f"**{t.leaks} of them reached it**",
        "changes received: " + ", ".join(f"{k} {n}" for k, n in sorted(t.kinds.items()))
        + f"; heartbeats {t.heartbeats}; changes to memories the run did not write {t.foreign}",
        f"Write ack: p50 {_ms(write['p50'])} ms, p99 {_ms(write['p99'])} ms, max {_ms(write['max'])} ms",
        "errors: " + ("; ".join(f"{k} × {n}" for k, n in [*result.write_errors.items(), *result.stream_errors.items()])
                      or "none"),
        f"warm-up {result.ready_seconds:.1f} s (until every stream had a change), writes {result.write_seconds:.1f} s, "
        f"drain {result.drain_seconds:.1f} s",
        f"the reading process (every stream, one asyncio loop): {100 * (result.cpu_share or 0):.0f} % of a core; "
        f"loop lag p50 {_ms(lag['p50'])} ms, p99 {_ms(lag['p99'])} ms, max {_ms(lag['max'])} ms",
    ]
    if result.server_cpu_share:
        lines.append("server CPU while writing (cores): " + ", ".join(
            f"{role} {share:.2f}" for role, share in result.server_cpu_share.items()))
    before, after = result.resident_bytes.get("before", {}), result.resident_bytes.get("after", {})
    if before:
        lines.append("resident size: " + ", ".join(f"{role} {_mib(before.get(role))} → {_mib(after.get(role))}"
                                                   for role in before))
    if settings:
        lines.append("server settings: " + ", ".join(f"{k}={v}" for k, v in settings.items()))
    return lines


def text_report(result: WatchResult, settings: Mapping[str, str]) -> str:
    widths = [max(len(h), len(c)) for h, c in zip(HEADER, _row(result))]
    lines = ["Watch latency", "  ".join(h.rjust(w) for h, w in zip(HEADER, widths)),
             "  ".join(c.rjust(w) for c, w in zip(_row(result), widths)), "", *facts(result, settings)]
    return "\n".join(lines) + "\n"


def markdown_report(result: WatchResult, before: Mapping[str, Any], after: Mapping[str, Any],
                    found: Mapping[str, str | None], settings: Mapping[str, str]) -> str:
    today = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"### Watch latency, {result.shape.get('replicas')} replica(s), {today}", "",
             "| " + " | ".join(HEADER) + " |", "|" + "---:|" * len(HEADER),
             "| " + " | ".join(_row(result)) + " |", "",
             *(f"- {line}" for line in facts(result, settings)),
             *(f"- {line}" for line in run_lines(before, after, found)), ""]
    return "\n".join(lines)


def json_report(result: WatchResult, before: Mapping[str, Any], after: Mapping[str, Any],
                found: Mapping[str, str | None], settings: Mapping[str, str]) -> dict[str, Any]:
    t, o = result.tally, result.options
    return {
        "benchmark": "watch",
        "options": {k: v for k, v in o.__dict__.items()},
        "servers": {**result.shape, "settings": dict(settings), "resident_bytes": result.resident_bytes},
        "machine": {"before": dict(before), "after": dict(after)},
        "versions": dict(found),
        "writes": result.writes, "failed_writes": len(t.failed), "write_errors": dict(result.write_errors),
        "write_ack_ms": result.write_latency(),
        "expected": t.expected(), "delivered": t.delivered(), "missing": t.missing(), "duplicates": t.duplicates,
        "hidden_pairs": t.hidden(), "leaks": t.leaks, "foreign": t.foreign, "kinds": dict(t.kinds),
        "heartbeats": t.heartbeats, "stream_errors": dict(result.stream_errors),
        "latency_ms": t.latency_ms(),
        # Every delivered pair's latency, so `memoryd bench plot` can redraw the distribution.
        "samples_ms": sorted(round(x * 1000, 3) for x in t.latencies()),
        "write_ack_samples_ms": sorted(round(x, 3) for x in result.write_ms),
        "seconds": {"ready": result.ready_seconds, "writes": result.write_seconds, "drain": result.drain_seconds},
        "client": {"cpu_share": result.cpu_share, "loop_lag_ms": result.loop_lag()},
        "server_cpu_share": result.server_cpu_share,
        "ok": result.ok,
    }
