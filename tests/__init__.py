
import os

# The suite starts and stops PostgreSQL (pg_ctl, as another OS user) from a process whose gRPC
# threads are busy; gRPC's fork handlers can then abort the forked child (seen: pg_ctl start
# died with SIGABRT in ev_epoll1_linux.cc). The server's CLI turns them off for the same reason.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
