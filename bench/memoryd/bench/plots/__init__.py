"""The benchmarks' figures: an SVG beside a run's table (``--plot``), or redrawn from its JSON
(``memoryd bench plot``). Pure: numbers in, SVG text out."""

from ._cli_plot import add_plot_command, add_plot_option, write_plot
from ._figures import FIGURES, PlotError, caption, figure, latency_panel, quick_figure, recall_panel
from ._svg import BarPanel, Bars, Guide, Panel, Series, cdf, svg

__all__ = ["BarPanel", "Bars", "FIGURES", "Guide", "Panel", "PlotError", "Series", "add_plot_command", "add_plot_option",
           "caption", "cdf", "figure", "latency_panel", "quick_figure", "recall_panel", "svg", "write_plot"]
