"""The server's process: the composition root that opens the stores, the gRPC server's start-up and
graceful shutdown, the listen address, readiness, and the ``memoryd worker`` process.
"""

from ._app import ADDR_SETTING, DEMO_TENANT, Memoryd, StartedServer
from ._compose import (
    Embedders,
    Stores,
    configured_embedder,
    keyword_hasher,
    open_database,
    open_stores,
    prepare_postgres,
)
from ._listen import SharedPort, reserve_shared_port
from ._worker import WatchedOutboxWorker, WorkerHealth, WorkerProcess

__all__ = ["ADDR_SETTING", "DEMO_TENANT", "Embedders", "Memoryd", "SharedPort", "StartedServer", "Stores",
           "WatchedOutboxWorker", "WorkerHealth", "WorkerProcess", "configured_embedder", "keyword_hasher",
           "open_database", "open_stores", "prepare_postgres", "reserve_shared_port"]
