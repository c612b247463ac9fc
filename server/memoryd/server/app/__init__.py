"""The server's process: the composition root that opens the stores and builds the object graph
on them, the gRPC server's start-up and graceful shutdown, the listen address, readiness, and
the ``memoryd worker`` process.
"""

from ._app import ADDR_SETTING, Memoryd, StartedServer
from ._compose import open_database
from ._graph import DEMO_TENANT, Graph, open_graph
from ._listen import SharedPort, reserve_shared_port
from ._worker import WatchedOutboxWorker, WorkerHealth, WorkerProcess

__all__ = ["ADDR_SETTING", "DEMO_TENANT", "Graph", "Memoryd", "SharedPort", "StartedServer", "WatchedOutboxWorker",
           "WorkerHealth", "WorkerProcess", "open_database", "open_graph", "reserve_shared_port"]
