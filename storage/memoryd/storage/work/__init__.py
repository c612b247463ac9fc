"""Background work in Postgres queues: the outbox that keeps the index in step, extraction jobs,
the lifecycle sweeper, the change log's wake-ups, re-checks of erasures, consolidation, re-indexing, and the index set a
process searches.
"""

from ._consolidation import Consolidated, Consolidations, Fragment
from ._erasure_recheck import ErasureRechecks
from ._index_set import IndexSet
from ._jobs import (
    Claim,
    ClaimedJob,
    ExtractionJobs,
    ModelOutage,
    PlannedItem,
    model_outage,
    pending_job_tenants,
)
from ._lifecycle import LifecycleSweeper, SweepReport, lifecycle_tenants
from ._listen import ChangeListener
from ._outbox import IndexTarget, OutboxLag, OutboxWorker, outbox_lag
from ._queue import WorkQueue
from ._reindex import ReindexReport, activate, active_model, reindex
from ._tenant_size import LargeTenants

__all__ = ["ChangeListener", "Claim", "ClaimedJob", "Consolidated", "Consolidations", "ErasureRechecks", "ExtractionJobs",
           "Fragment", "IndexSet", "IndexTarget", "LargeTenants", "LifecycleSweeper", "ModelOutage",
           "OutboxLag", "OutboxWorker", "PlannedItem", "ReindexReport", "SweepReport", "WorkQueue",
           "activate", "active_model", "lifecycle_tenants", "model_outage", "outbox_lag",
           "pending_job_tenants", "reindex"]
