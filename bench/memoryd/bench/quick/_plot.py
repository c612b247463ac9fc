"""``memoryd bench quick``'s figure, an SVG written by hand (no plotting library to install for
three small line charts): the Recall latency distribution of short (LoCoMo) and long (MADial
query text) queries, and the mixed load's calls/s and Recall p99 against the number of
closed-loop workers; this run in solid lines, the previous run dashed, targets dotted.

``svg`` draws any panels of ``Series``; ``quick_figure`` builds bench quick's panels from two runs'
JSON (``json_quick``), so a figure can be redrawn from the history alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from ._quick_report import run_line

Point = tuple[float, float]

WIDTH, HEIGHT = 440, 300  # one panel's plot area and margins, in px
LEFT, RIGHT, TOP, BOTTOM = 64, 20, 44, 48
LEGEND_LINE = 16
SHORT, LONG, MEM0, RATE, TAIL_COLOUR = "#1f77b4", "#ff7f0e", "#2ca02c", "#1f77b4", "#d62728"


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[Point, ...]
    colour: str
    dashed: bool = False
    markers: bool = False  # a dot on each point (a curve of few points)


@dataclass(frozen=True)
class Guide:
    """A target, dotted: a vertical line at ``x`` or a horizontal one at ``y``."""

    label: str
    x: float | None = None
    y: float | None = None


@dataclass(frozen=True)
class Panel:
    title: str
    x_label: str
    y_label: str
    series: tuple[Series, ...]
    guides: tuple[Guide, ...] = ()
    x_log: bool = False
    x_ticks: tuple[float, ...] = ()  # none: chosen from the range
    y_ticks: tuple[float, ...] = ()  # none: from 0 (or below) to the highest point


def cdf(values: Sequence[float]) -> tuple[Point, ...]:
    """(value, share of calls at most that value), one point per call."""
    ordered = sorted(values)
    return tuple((v, (i + 1) / len(ordered)) for i, v in enumerate(ordered))


def _nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        high = low + 1
    raw = (high - low) / count
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 5, 10) if m * step >= raw)
    first = math.floor(low / step) * step
    return [first + i * step for i in range(int(math.ceil((high - first) / step)) + 1)]


def _log_ticks(low: float, high: float) -> list[float]:
    ticks = []
    for decade in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        ticks += [m * 10 ** decade for m in (1, 2, 5)]
    inside = [t for t in ticks if low <= t <= high]
    return inside or [low, high]


def _label(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:g}"


class _Scale:
    def __init__(self, low: float, high: float, log: bool, start: float, length: float) -> None:
        self.log, self.start, self.length = log, start, length
        self.low, self.high = (math.log10(low), math.log10(high)) if log else (low, high)
        if self.high <= self.low:
            self.high = self.low + 1

    def __call__(self, value: float) -> float:
        v = math.log10(value) if self.log else value
        return self.start + (v - self.low) / (self.high - self.low) * self.length


def _panel(panel: Panel, left: float, top: float) -> list[str]:
    xs = [x for s in panel.series for x, _ in s.points] + [g.x for g in panel.guides if g.x is not None]
    ys = [y for s in panel.series for _, y in s.points] + [g.y for g in panel.guides if g.y is not None]
    out = [f'<g class="panel"><text x="{left + WIDTH / 2:.1f}" y="{top - 24:.1f}" text-anchor="middle" '
           f'font-weight="bold">{escape(panel.title)}</text>']
    if panel.x_log:
        xs = [x for x in xs if x > 0]
    if not xs or not ys:
        out.append(f'<text x="{left + WIDTH / 2:.1f}" y="{top + HEIGHT / 2:.1f}" text-anchor="middle">'
                   'not measured</text></g>')
        return out
    if panel.x_log:
        x_low, x_high = min(xs) / 1.15, max(xs) * 1.15
        x_ticks = list(panel.x_ticks) or _log_ticks(x_low, x_high)
    else:
        x_ticks = list(panel.x_ticks) or _nice_ticks(min(xs), max(xs))
        x_low, x_high = min(x_ticks[0], min(xs)), max(x_ticks[-1], max(xs))
    y_ticks = list(panel.y_ticks) or _nice_ticks(min(0.0, min(ys)), max(ys) * 1.05)
    x = _Scale(x_low, x_high, panel.x_log, left, WIDTH)
    y = _Scale(y_ticks[0], y_ticks[-1], False, top + HEIGHT, -HEIGHT)
    out.append(f'<rect x="{left}" y="{top}" width="{WIDTH}" height="{HEIGHT}" fill="none" stroke="#999"/>')
    for t in x_ticks:
        out.append(f'<line x1="{x(t):.1f}" y1="{top + HEIGHT}" x2="{x(t):.1f}" y2="{top + HEIGHT + 4}" stroke="#999"/>'
                   f'<text x="{x(t):.1f}" y="{top + HEIGHT + 16}" text-anchor="middle">{_label(t)}</text>')
    for t in y_ticks:
        out.append(f'<line x1="{left}" y1="{y(t):.1f}" x2="{left + WIDTH}" y2="{y(t):.1f}" stroke="#eee"/>'
                   f'<text x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{_label(t)}</text>')
    out.append(f'<text x="{left + WIDTH / 2:.1f}" y="{top + HEIGHT + 34}" text-anchor="middle">'
               f'{escape(panel.x_label)}</text>'
               f'<text transform="translate({left - 46},{top + HEIGHT / 2:.1f}) rotate(-90)" text-anchor="middle">'
               f'{escape(panel.y_label)}</text>')
    for guide in panel.guides:
        if guide.x is not None and x_low <= guide.x <= x_high:
            out.append(f'<line class="guide" x1="{x(guide.x):.1f}" y1="{top}" x2="{x(guide.x):.1f}" '
                       f'y2="{top + HEIGHT}" stroke="#555" stroke-dasharray="2,3"/>'
                       f'<text transform="translate({x(guide.x) - 4:.1f},{top + 4}) rotate(-90)" text-anchor="end" '
                       f'fill="#555">{escape(guide.label)}</text>')  # along its line: close ones never overlap
        elif guide.y is not None:
            out.append(f'<line class="guide" x1="{left}" y1="{y(guide.y):.1f}" x2="{left + WIDTH}" '
                       f'y2="{y(guide.y):.1f}" stroke="#555" stroke-dasharray="2,3"/>'
                       f'<text x="{left + 4}" y="{y(guide.y) - 4:.1f}" fill="#555">{escape(guide.label)}</text>')
    for series in panel.series:
        points = [(px, py) for px, py in series.points if px > 0 or not panel.x_log]
        dash = ' stroke-dasharray="6,4"' if series.dashed else ""
        path = " ".join(f"{x(px):.1f},{y(py):.1f}" for px, py in points)
        out.append(f'<g class="series" data-name={quoteattr(series.name)}><title>{escape(series.name)}</title>'
                   f'<polyline points="{path}" fill="none" stroke="{series.colour}" stroke-width="1.6"{dash}/>')
        if series.markers:
            out += [f'<circle cx="{x(px):.1f}" cy="{y(py):.1f}" r="3" fill="{series.colour}"/>' for px, py in points]
        out.append("</g>")
    for i, series in enumerate(panel.series):
        row = top + HEIGHT + BOTTOM + 4 + i * LEGEND_LINE
        dash = ' stroke-dasharray="6,4"' if series.dashed else ""
        out.append(f'<line x1="{left}" y1="{row - 4}" x2="{left + 28}" y2="{row - 4}" stroke="{series.colour}" '
                   f'stroke-width="1.6"{dash}/><text x="{left + 34}" y="{row}">{escape(series.name)}</text>')
    out.append("</g>")
    return out


def svg(panels: Sequence[Panel], title: str, notes: Sequence[str] = ()) -> str:
    """Panels side by side under a title, each with its legend below it; valid standalone SVG."""
    legend = max((len(p.series) for p in panels), default=0) * LEGEND_LINE
    head = 28 + LEGEND_LINE * len(notes)
    width = len(panels) * (LEFT + WIDTH + RIGHT)
    height = head + TOP + HEIGHT + BOTTOM + legend + 8
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="18" font-size="13" font-weight="bold">{escape(title)}</text>']
    out += [f'<text x="10" y="{34 + i * LEGEND_LINE}">{escape(note)}</text>' for i, note in enumerate(notes)]
    for i, panel in enumerate(panels):
        out += _panel(panel, i * (LEFT + WIDTH + RIGHT) + LEFT, head + TOP)
    out.append("</svg>")
    return "\n".join(out) + "\n"


# --- bench quick's figure -----------------------------------------------------------------------

def _targets(document: Mapping[str, Any]) -> dict[str, float]:
    return {row["key"]: row["target"] for row in document.get("rows", []) if row.get("target") is not None}


def _level(targets: Mapping[str, float], key: str, unit: str) -> tuple[Guide, ...]:
    return (Guide(f"target {targets[key]:g} {unit}", y=targets[key]),) if key in targets else ()


def _curve(document: Mapping[str, Any] | None, field: str) -> tuple[Point, ...]:
    if document is None:
        return ()
    return tuple((float(p["workers"]), float(p[field])) for p in document.get("details", {}).get("load_curve", [])
                 if p.get(field) is not None)


def quick_figure(now: Mapping[str, Any], previous: Mapping[str, Any] | None) -> str:
    """bench quick's three panels from this run's JSON and the previous run's (or none)."""
    targets = _targets(now)
    latency: list[Series] = []
    for document, dashed, when in ((now, False, "this run"), (previous, True, "previous")):
        samples = (document or {}).get("details", {}).get("samples_ms", {})
        for key, name, colour in (("short", "short (LoCoMo questions)", SHORT),
                                  ("long", "long (MADial dialogues as query)", LONG),
                                  ("mem0", "Mem0 search, same questions, in process", MEM0)):
            if samples.get(key) and not (dashed and key == "mem0"):
                latency.append(Series(f"{name}, {when}", cdf(samples[key]), colour, dashed))
    guides = tuple(Guide(f"{label} target {targets[key]:g} ms", x=targets[key])
                   for key, label in (("recall_p50", "p50"), ("recall_p99", "p99")) if key in targets)
    workers = sorted({x for x, _ in _curve(now, "calls_per_second") + _curve(previous, "calls_per_second")})
    panels = [
        Panel("Recall latency (CDF), one call at a time", "ms (log scale)", "share of calls at most",
              tuple(latency), guides, x_log=True, y_ticks=(0.0, 0.25, 0.5, 0.75, 1.0)),
        Panel("Mixed load 80/15/5: throughput", "closed-loop workers", "successful calls/s",
              tuple(s for s in (Series("this run", _curve(now, "calls_per_second"), RATE, markers=True),
                                Series("previous", _curve(previous, "calls_per_second"), RATE, True, True))
                    if s.points),
              _level(targets, "load_rate", "calls/s"), x_log=True, x_ticks=tuple(workers)),
        Panel("Mixed load 80/15/5: Recall p99", "closed-loop workers", "Recall p99, ms",
              tuple(s for s in (Series("this run", _curve(now, "recall_p99_ms"), TAIL_COLOUR, markers=True),
                                Series("previous", _curve(previous, "recall_p99_ms"), TAIL_COLOUR, True, True))
                    if s.points),
              _level(targets, "load_recall_p99", "ms"), x_log=True, x_ticks=tuple(workers)),
    ]
    notes = [f"this run: {run_line(now)}"] + ([f"previous: {run_line(previous)}"] if previous else [])
    return svg(panels, "memoryd bench quick", notes)
