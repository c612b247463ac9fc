"""The benchmarks' SVG writer, by hand: line panels (a latency CDF, a throughput curve) and grouped
bar panels (recall by category), side by side under a title and a caption line, each with its
legend below it.

Written by hand rather than with matplotlib: the figures are a few polylines and rectangles, the
output is byte-identical for the same numbers by construction (no dates, ids or hash salts to
switch off), every label is a ``<text>`` a test can read, a figure is ~10 KB, and the benchmarks
install nothing more (matplotlib would bring numpy, Pillow, fonttools, kiwisolver and contourpy).

``svg`` draws any ``Panel`` (lines) and ``BarPanel`` (bars); ``_figures`` builds the benchmarks'
figures from their JSON.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

Point = tuple[float, float]

WIDTH, HEIGHT = 440, 300  # one panel's plot area and margins, in px
LEFT, RIGHT, TOP, BOTTOM = 64, 20, 44, 48
LEGEND_LINE = 16
# A white outline under a guide's label keeps it readable where it crosses a curve.
HALO = ' stroke="white" stroke-width="3" stroke-linejoin="round" paint-order="stroke"'
WRAPPED = 12  # the room a bar panel's two-line group labels take below the axis
# matplotlib's default cycle ("tab10"): distinct, and readable by most colour-blind readers.
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


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


def cdf(values: Sequence[float], points: int = 500) -> tuple[Point, ...]:
    """(value, share of calls at most that value): one point per call, or ``points`` points at
    evenly spaced ranks (the first and the slowest call always among them) so a long run's
    figure stays small."""
    ordered = sorted(values)
    n = len(ordered)
    ranks = range(n) if n <= points else sorted({round(i * (n - 1) / (points - 1)) for i in range(points)})
    return tuple((ordered[r], (r + 1) / n) for r in ranks)


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
                       f'fill="#555"{HALO}>{escape(guide.label)}</text>')  # along its line: close ones never overlap
        elif guide.y is not None:
            out.append(f'<line class="guide" x1="{left}" y1="{y(guide.y):.1f}" x2="{left + WIDTH}" '
                       f'y2="{y(guide.y):.1f}" stroke="#555" stroke-dasharray="2,3"/>'
                       f'<text x="{left + 4}" y="{y(guide.y) - 4:.1f}" fill="#555"{HALO}>{escape(guide.label)}</text>')
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


@dataclass(frozen=True)
class Bars:
    """One series of a bar panel: a value per group (None: not measured, drawn as "n/a")."""

    name: str
    values: tuple[float | None, ...]
    colour: str


@dataclass(frozen=True)
class BarPanel:
    """Grouped bars: one group per category along x, one bar per series in each group, each bar
    labelled with its value."""

    title: str
    x_label: str
    y_label: str
    groups: tuple[str, ...]
    series: tuple[Bars, ...]
    y_ticks: tuple[float, ...] = ()  # none: from 0 to the highest bar
    digits: int = 2  # of the value written above each bar


def _halves(label: str) -> tuple[str, ...]:
    """The label split at the space nearest its middle (as it is without a space)."""
    spaces = [i for i, c in enumerate(label) if c == " "]
    if not spaces:
        return (label,)
    cut = min(spaces, key=lambda i: abs(i - len(label) / 2))
    return label[:cut], label[cut + 1:]


def _bar_panel(panel: BarPanel, left: float, top: float) -> list[str]:
    out = [f'<g class="panel"><text x="{left + WIDTH / 2:.1f}" y="{top - 24:.1f}" text-anchor="middle" '
           f'font-weight="bold">{escape(panel.title)}</text>']
    values = [v for bars in panel.series for v in bars.values if v is not None]
    if not panel.groups or not values:
        out.append(f'<text x="{left + WIDTH / 2:.1f}" y="{top + HEIGHT / 2:.1f}" text-anchor="middle">'
                   'not measured</text></g>')
        return out
    y_ticks = list(panel.y_ticks) or _nice_ticks(0.0, max(values) * 1.05)
    y = _Scale(y_ticks[0], y_ticks[-1], False, top + HEIGHT, -HEIGHT)
    out.append(f'<rect x="{left}" y="{top}" width="{WIDTH}" height="{HEIGHT}" fill="none" stroke="#999"/>')
    for t in y_ticks:
        out.append(f'<line x1="{left}" y1="{y(t):.1f}" x2="{left + WIDTH}" y2="{y(t):.1f}" stroke="#eee"/>'
                   f'<text x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{_label(t)}</text>')
    group_width = WIDTH / len(panel.groups)
    bar_width = 0.8 * group_width / len(panel.series)
    # A label wider than its group (~6 px a character) is set on two lines, split at a space.
    wrap = any(len(group) * 6 > group_width for group in panel.groups)
    for g, group in enumerate(panel.groups):
        middle = left + (g + 0.5) * group_width
        lines = _halves(group) if wrap else (group,)
        out.append(f'<text x="{middle:.1f}" y="{top + HEIGHT + 16}" text-anchor="middle" '
                   f'data-group={quoteattr(group)}>'
                   + "".join(f'<tspan x="{middle:.1f}" dy="{12 * (i > 0)}">{escape(line)}</tspan>' if wrap
                             else escape(line) for i, line in enumerate(lines)) + "</text>")
    out.append(f'<text x="{left + WIDTH / 2:.1f}" y="{top + HEIGHT + 34 + WRAPPED * wrap}" text-anchor="middle">'
               f'{escape(panel.x_label)}</text>'
               f'<text transform="translate({left - 46},{top + HEIGHT / 2:.1f}) rotate(-90)" text-anchor="middle">'
               f'{escape(panel.y_label)}</text>')
    for s, bars in enumerate(panel.series):
        out.append(f'<g class="series" data-name={quoteattr(bars.name)}><title>{escape(bars.name)}</title>')
        for g, (group, value) in enumerate(zip(panel.groups, bars.values)):
            x = left + g * group_width + 0.1 * group_width + s * bar_width
            middle = x + bar_width / 2
            if value is None:
                out.append(f'<text class="value" x="{middle:.1f}" y="{top + HEIGHT - 4}" text-anchor="middle" '
                           f'font-size="9" data-group={quoteattr(group)}>n/a</text>')
                continue
            height = (top + HEIGHT) - y(value)
            out.append(f'<rect class="bar" x="{x:.1f}" y="{y(value):.1f}" width="{bar_width:.1f}" '
                       f'height="{height:.1f}" fill="{bars.colour}" data-group={quoteattr(group)} '
                       f'data-value="{value:.6g}"/>'
                       f'<text class="value" x="{middle:.1f}" y="{y(value) - 3:.1f}" text-anchor="middle" '
                       f'font-size="9">{value:.{panel.digits}f}</text>')
        out.append("</g>")
    for i, bars in enumerate(panel.series):
        row = top + HEIGHT + BOTTOM + 4 + WRAPPED * wrap + i * LEGEND_LINE
        out.append(f'<rect x="{left + 8}" y="{row - 9}" width="12" height="10" fill="{bars.colour}"/>'
                   f'<text x="{left + 34}" y="{row}">{escape(bars.name)}</text>')
    out.append("</g>")
    return out


def svg(panels: Sequence[Panel | BarPanel], title: str, notes: Sequence[str] = (), columns: int = 3) -> str:
    """Panels in rows of ``columns`` under a title and the notes (the caption: which run, on what
    machine), each with its legend below it; valid standalone SVG, the same bytes for the same
    input."""
    rows = [list(panels[i:i + columns]) for i in range(0, len(panels), columns)] or [[]]
    heights = [TOP + HEIGHT + BOTTOM + max((len(p.series) for p in row), default=0) * LEGEND_LINE + 8
               + WRAPPED * any(isinstance(p, BarPanel) for p in row) for row in rows]
    head = 28 + LEGEND_LINE * len(notes)
    # Wide enough for the title and the caption (~8 and ~6.5 px a character), and for the panels.
    width = max(max(len(row) for row in rows) * (LEFT + WIDTH + RIGHT), 20 + math.ceil(8 * len(title)),
                *(20 + math.ceil(6.5 * len(note)) for note in notes))
    height = head + sum(heights)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<title>{escape(title)}</title>',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="18" font-size="13" font-weight="bold">{escape(title)}</text>']
    out += [f'<text class="caption" x="10" y="{34 + i * LEGEND_LINE}">{escape(note)}</text>'
            for i, note in enumerate(notes)]
    top = head
    for row, row_height in zip(rows, heights):
        for i, panel in enumerate(row):
            left = i * (LEFT + WIDTH + RIGHT) + LEFT
            out += _bar_panel(panel, left, top + TOP) if isinstance(panel, BarPanel) else _panel(panel, left, top + TOP)
        top += row_height
    out.append("</svg>")
    return "\n".join(out) + "\n"
