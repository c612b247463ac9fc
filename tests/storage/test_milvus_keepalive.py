"""memoryd's channel to its Milvus Lite sends no keepalive pings.

Milvus Lite is a gRPC server inside memoryd's process with gRPC's default ping policy (at most
one ping per 5 minutes on a connection without data). pymilvus pings every 10 s by default, so
an idle embedded memoryd had its Lite channel closed with GOAWAY "too_many_pings" and logged
``Received a GOAWAY with error code ENHANCE_YOUR_CALM`` again and again. gRPC's keepalive trace
shows whether a channel keeps a keepalive timer at all: it says "Keepalive ping cancelled" each
time a call's data resets the timer of a channel that has one, so the answer comes from a few
calls, without waiting for a ping to be due.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from ..support import ROOT

# Opens the index on a Lite file (which starts Lite's server in the process), makes calls,
# then names the port Lite listens on.
_PROGRAM = """
import asyncio, os, sys
from milvus_lite.server_manager import server_manager_instance
from memoryd.storage import MilvusIndex

async def main(path):
    index = MilvusIndex(path, model_id="keepalive-probe", dim=4)
    for _ in range(3):
        await index.ping()
    await index.close()

asyncio.run(main(sys.argv[1]))
print("lite port", server_manager_instance._servers[os.path.abspath(sys.argv[1])][2], flush=True)
"""


def test_the_channel_to_milvus_lite_has_no_keepalive_timer(tmp_path: Path) -> None:
    env = {**os.environ, "GRPC_TRACE": "http_keepalive", "GRPC_VERBOSITY": "debug"}
    run = subprocess.run([sys.executable, "-c", _PROGRAM, str(tmp_path / "lite.db")], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    port = re.search(r"lite port (\d+)", run.stdout)
    assert port, run.stdout
    # The trace names the peer: for pymilvus's side of the channel, Lite's listening port.
    client_side = [line for line in run.stderr.splitlines() if f"127.0.0.1:{port.group(1)}:" in line]
    assert not [line for line in client_side if "eepalive" in line], "\n".join(client_side[:10])
    assert "ENHANCE_YOUR_CALM" not in run.stderr
