"""Each benchmark's figure, drawn from the JSON it writes (``--json``), so ``memoryd bench plot``
redraws a figure from a kept file and ``--plot`` draws the same one at the end of a run:

- latency distribution (a CDF per operation, log scale, p50/p95/p99 of the first marked):
  ``load`` (with p50/p95/p99 per operation as bars), ``watch``, ``sessions``;
- recall by category (grouped bars, one bar per k): ``locomo-retrieval`` (LoCoMo's categories),
  ``madial`` (zh and en, per query shape);
- ``quick``: its latency CDFs, recall by category and the mixed load's throughput curve (calls/s
  and Recall p99 against closed-loop workers), this run solid and the previous run dashed.

The caption says which run: its commit, the machine and the load average before and after, as
the Markdown reports do; no time of day, so the same JSON gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._metrics import percentile
from ._svg import COLOURS, BarPanel, Bars, Guide, Panel, Series, cdf, svg

PERCENTILES = (50, 95, 99)
SHARE_TICKS = (0.0, 0.25, 0.5, 0.75, 1.0)
RECALL_TICKS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


class PlotError(ValueError):
    """A document no figure can be drawn from (not a benchmark's JSON, or a benchmark without one)."""


def caption(document: Mapping[str, Any], run: str = "") -> list[str]:
    """Which run, on what machine, under what load: the facts every report records, on two lines
    (one panel's width each). ``run``: a name put first ("this run: ")."""
    machine = document.get("machine") or {}
    before, after = machine.get("before") or {}, machine.get("after") or {}
    return [f"{run}git {(document.get('versions') or {}).get('git')} · {before.get('cpu')}, {before.get('nproc')} "
            "usable cores",
            f"load average (1/5/15 min) {before.get('loadavg')} before, "
            f"{after.get('loadavg')} after"]


def _count(n: int, thing: str) -> str:
    return f"{n:,} {thing}{'' if n == 1 else 's'}"


def latency_panel(title: str, samples: Mapping[str, Sequence[float]], counted: str = "call") -> Panel:
    """A CDF per named sample (ms), log scale; p50/p95/p99 of the first sample marked (the
    table's percentiles: the same arithmetic). ``counted``: what one of the first sample is, for
    the axis and the legend (the others count calls)."""
    measured = [(name, values) for name, values in samples.items() if values]
    series = tuple(Series(f"{name} ({_count(len(values), counted if i == 0 else 'call')})", cdf(values),
                          COLOURS[i % len(COLOURS)])
                   for i, (name, values) in enumerate(measured))
    guides: tuple[Guide, ...] = ()
    if measured:
        name, values = measured[0]
        guides = tuple(Guide(f"{name} p{q} {percentile(values, q):,.1f} ms", x=percentile(values, q))
                       for q in PERCENTILES)
    return Panel(title, "latency, ms (log scale)", "share at most (CDF)", series, guides, x_log=True,
                 y_ticks=SHARE_TICKS)


def recall_panel(title: str, groups: Mapping[str, Mapping[str, float | None]], ks: Sequence[int]) -> BarPanel:
    """Grouped bars: a group per category, a bar per recall@k (None: not measured)."""
    series = tuple(Bars(f"recall@{k}", tuple(recall.get(str(k)) for recall in groups.values()), COLOURS[i])
                   for i, k in enumerate(ks))
    return BarPanel(title, "category", "recall (share of evidence found)", tuple(groups), series, RECALL_TICKS)


def _ks(groups: Mapping[str, Mapping[str, float | None]]) -> list[int]:
    return sorted({int(k) for recall in groups.values() for k in recall})


def locomo_figure(document: Mapping[str, Any]) -> str:
    groups = {row["label"]: row["recall"] for row in document.get("categories", {}).values()}
    if document.get("overall"):
        groups[document["overall"]["label"]] = document["overall"]["recall"]
    conversations = len(document.get("dataset", {}).get("conversations", []))
    return svg([recall_panel(f"LoCoMo, {conversations} conversation(s): recall@k by category", groups, _ks(groups))],
               "memoryd bench locomo", caption(document))


def _madial_groups(rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Mapping[str, float | None]]:
    return {f"{row['mode']}, as {shape}": row["recall"] for shape, shape_rows in rows.items() for row in shape_rows}


def madial_figure(document: Mapping[str, Any]) -> str:
    groups = _madial_groups(document.get("rows", {}))
    return svg([recall_panel("MADial-Bench: recall@k by language and query shape", groups, _ks(groups))],
               "memoryd bench madial", caption(document))


def load_figure(document: Mapping[str, Any]) -> str:
    samples = document.get("samples_ms", {})
    options = document.get("options", {})
    operations = document.get("operations", {})
    bars = tuple(Bars(f"p{q}", tuple(operations[op].get(f"p{q}_ms") for op in operations), COLOURS[i])
                 for i, q in enumerate(PERCENTILES))
    throughput = document.get("throughput_per_second")
    title = (f"{options.get('concurrency')} closed-loop workers, {options.get('tenants')} tenants, "
             f"{document.get('seconds', 0):.0f} s: " + (f"{throughput:,.1f} calls/s" if throughput else "no calls"))
    panels: list[Panel | BarPanel] = [
        latency_panel("Latency by operation (CDF)", samples),
        BarPanel("Percentiles by operation", "operation", "ms", tuple(operations), bars, digits=1)]
    curve = document.get("curve", [])
    if len(curve) > 1:  # --concurrency N,N,...: the table above is the last level's
        title = f"{', '.join(str(p['workers']) for p in curve)} closed-loop workers in turn, last: " + title
        panels += throughput_panels(curve, "Mixed load 80/15/5")
    return svg(panels, f"memoryd bench load — {title}", caption(document), columns=2)


def throughput_panels(curve: Sequence[Mapping[str, Any]], what: str) -> list[Panel | BarPanel]:
    """The throughput curve: successful calls/s, and Recall p50 and p99, against closed-loop workers."""
    workers = tuple(float(p["workers"]) for p in curve)

    def points(field: str) -> tuple[tuple[float, float], ...]:
        return tuple((float(p["workers"]), float(p[field])) for p in curve if p.get(field) is not None)

    return [Panel(f"{what}: throughput", "closed-loop workers", "successful calls/s",
                  (Series("calls/s", points("calls_per_second"), COLOURS[0], markers=True),),
                  x_log=True, x_ticks=workers),
            Panel(f"{what}: Recall latency", "closed-loop workers", "Recall latency, ms",
                  (Series("Recall p50", points("recall_p50_ms"), COLOURS[1], markers=True),
                   Series("Recall p99", points("recall_p99_ms"), COLOURS[3], markers=True)),
                  x_log=True, x_ticks=workers)]


def watch_figure(document: Mapping[str, Any]) -> str:
    options, servers = document.get("options", {}), document.get("servers", {})
    title = (f"{options.get('streams')} streams, {options.get('rate'):g} writes/s for {options.get('duration'):g} s, "
             f"{servers.get('replicas')} replica(s)")
    return svg([latency_panel("Write → change delivered to each stream that sees it (CDF)",
                              {"delivered": document.get("samples_ms", []),
                               "Write acknowledged": document.get("write_ack_samples_ms", [])}, "change")],
               f"memoryd bench watch — {title}", caption(document))


def sessions_figure(document: Mapping[str, Any]) -> str:
    return svg([latency_panel(f"ResumeSession, one call at a time, {document.get('memories')} memories "
                              f"({document.get('text_bytes')} B of text)",
                              {"ResumeSession": document.get("samples_ms", [])})],
               "memoryd bench sessions", caption(document))


# --- bench quick ----------------------------------------------------------------------------------

def _targets(document: Mapping[str, Any]) -> dict[str, float]:
    return {row["key"]: row["target"] for row in document.get("rows", []) if row.get("target") is not None}


def _level(targets: Mapping[str, float], key: str, unit: str) -> tuple[Guide, ...]:
    return (Guide(f"target {targets[key]:g} {unit}", y=targets[key]),) if key in targets else ()


def _curve(document: Mapping[str, Any] | None, field: str) -> tuple[tuple[float, float], ...]:
    if document is None:
        return ()
    return tuple((float(p["workers"]), float(p[field])) for p in document.get("details", {}).get("load_curve", [])
                 if p.get(field) is not None)


def _quick_recall(document: Mapping[str, Any]) -> BarPanel:
    """LoCoMo's categories and MADial's zh and en (as query text) side by side, at the ks both have."""
    details = document.get("details", {})
    groups: dict[str, Mapping[str, float | None]] = {
        label: row["recall"] for label, row in details.get("locomo", {}).get("categories", {}).items()}
    madial = details.get("madial", {}).get("rows", {})
    groups |= {f"MADial {row['mode']}": row["recall"] for row in madial.get("query", [])}
    return recall_panel("Recall by category (LoCoMo, MADial as query)", groups, (5, 10))


def quick_figure(now: Mapping[str, Any], previous: Mapping[str, Any] | None) -> str:
    """bench quick's panels from this run's JSON and the previous run's (or none)."""
    short, long, mem0, rate, tail = COLOURS[0], COLOURS[1], COLOURS[2], COLOURS[0], COLOURS[3]
    targets = _targets(now)
    latency: list[Series] = []
    for document, dashed, when in ((now, False, "this run"), (previous, True, "previous")):
        samples = (document or {}).get("details", {}).get("samples_ms", {})
        for key, name, colour in (("short", "short (LoCoMo questions)", short),
                                  ("long", "long (MADial dialogues as query)", long),
                                  ("mem0", "Mem0 search, same questions, in process", mem0)):
            if samples.get(key) and not (dashed and key == "mem0"):
                latency.append(Series(f"{name}, {when}", cdf(samples[key]), colour, dashed))
    guides = tuple(Guide(f"{label} target {targets[key]:g} ms", x=targets[key])
                   for key, label in (("recall_p50", "p50"), ("recall_p99", "p99")) if key in targets)
    workers = sorted({x for x, _ in _curve(now, "calls_per_second") + _curve(previous, "calls_per_second")})
    panels: list[Panel | BarPanel] = [
        Panel("Recall latency (CDF), one call at a time", "ms (log scale)", "share of calls at most",
              tuple(latency), guides, x_log=True, y_ticks=SHARE_TICKS),
        Panel("Mixed load 80/15/5: throughput", "closed-loop workers", "successful calls/s",
              tuple(s for s in (Series("this run", _curve(now, "calls_per_second"), rate, markers=True),
                                Series("previous", _curve(previous, "calls_per_second"), rate, True, True))
                    if s.points),
              _level(targets, "load_rate", "calls/s"), x_log=True, x_ticks=tuple(workers)),
        Panel("Mixed load 80/15/5: Recall p99", "closed-loop workers", "Recall p99, ms",
              tuple(s for s in (Series("this run", _curve(now, "recall_p99_ms"), tail, markers=True),
                                Series("previous", _curve(previous, "recall_p99_ms"), tail, True, True))
                    if s.points),
              _level(targets, "load_recall_p99", "ms"), x_log=True, x_ticks=tuple(workers)),
    ]
    if now.get("details", {}).get("locomo", {}).get("categories") or now.get("details", {}).get("madial"):
        panels.insert(1, _quick_recall(now))
    notes = caption(now, "this run: ") + (caption(previous, "previous: ") if previous else [])
    return svg(panels, "memoryd bench quick", notes, columns=2)


FIGURES: Mapping[str, Callable[[Mapping[str, Any]], str]] = {
    "locomo-retrieval": locomo_figure, "madial": madial_figure, "load": load_figure, "watch": watch_figure,
    "sessions": sessions_figure, "quick": lambda document: quick_figure(document, None)}


def figure(document: Mapping[str, Any], previous: Mapping[str, Any] | None = None) -> str:
    """The figure of any benchmark's JSON (``previous``: bench quick's run to compare with)."""
    name = document.get("benchmark") if isinstance(document, Mapping) else None
    if name == "quick":
        return quick_figure(document, previous)
    if name not in FIGURES:
        raise PlotError(f"not a benchmark's JSON with a figure (\"benchmark\": {name!r}; figures are drawn for "
                        f"{', '.join(sorted(FIGURES))})")
    try:
        return FIGURES[str(name)](document)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise PlotError(f"the {name} JSON lacks what its figure needs ({type(exc).__name__}: {exc}); "
                        "was it written by an older memoryd bench?") from None
