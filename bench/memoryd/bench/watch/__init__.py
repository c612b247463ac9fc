"""Watch: the latency from a visible write to the streams that should see it
(``memoryd bench watch``), on one server or across the distributed lane's replicas."""

from ._cli_watch import add_watch_command
from ._plan import READERS, Reader, Stream, Tally, Write, plan_streams, planned_write, subjects, warmup_write
from ._watch import WatchOptions, WatchResult, run_watch

__all__ = ["READERS", "Reader", "Stream", "Tally", "WatchOptions", "WatchResult", "Write", "add_watch_command",
           "plan_streams", "planned_write", "run_watch", "subjects", "warmup_write"]
