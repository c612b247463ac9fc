"""Load and scale: the mixed-load run (``memoryd bench load``) and the scale curves, write and
indexing rates (``memoryd bench scale``).
"""

from ._cli_scale import add_scale_command, parse_sizes, parse_workers
from ._load import LoadOptions, LoadResult, run_load, run_load_curve
from ._load_report import curve_point, curve_text
from ._load_report import json_report as load_json_report
from ._load_report import markdown_report as load_markdown_report
from ._load_report import text_report as load_text_report
from ._endpoint import EmbeddingEndpoint, endpoint_environment
from ._scale import (
    BARRIER,
    Loader,
    MAX_WRITE_BATCH,
    Point,
    ScaleOptions,
    Tenants,
    connect,
    latency,
    measure_acks,
    measure_indexing,
    measure_recall,
    recall_by_keys,
)

__all__ = ["BARRIER", "EmbeddingEndpoint", "LoadOptions", "LoadResult", "Loader", "MAX_WRITE_BATCH", "Point",
           "ScaleOptions", "Tenants", "add_scale_command", "connect", "curve_point", "curve_text",
           "endpoint_environment", "latency", "load_json_report", "load_markdown_report", "load_text_report",
           "measure_acks", "measure_indexing", "measure_recall", "parse_sizes", "parse_workers", "recall_by_keys",
           "run_load", "run_load_curve"]
