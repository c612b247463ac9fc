"""The embedded default's demo agent gets a full view on the first start only: an admin's
deletion of it must survive a restart (it used to come back with full rights)."""

from __future__ import annotations

from pathlib import Path

import grpc

from memoryd.v1 import view_admin_service_pb2 as admin

from ..support import Agent, ServerProcess, draft, fails, server_env


def _embedded(tmp_path: Path) -> ServerProcess:
    process = ServerProcess(server_env(), tmp_path / "server.log")
    process.cwd = tmp_path
    return process


def _token(tmp_path: Path, name: str) -> str:
    return (tmp_path / ".memoryd" / "tokens" / f"{name}.token").read_text().strip()


def test_a_deleted_demo_view_stays_deleted_after_a_restart(tmp_path):
    process = _embedded(tmp_path).start()
    try:
        with grpc.insecure_channel(process.target) as channel:
            demo, operator = Agent(channel, _token(tmp_path, "demo-agent")), Agent(channel, _token(tmp_path, "admin"))
            demo.write("alice", draft("preference", "tea", key="drink"))
            assert operator.call("DeleteView", admin.DeleteViewRequest(agent="demo-agent")).deleted
    finally:
        assert process.stop() == 0

    process = _embedded(tmp_path).start()
    try:
        with grpc.insecure_channel(process.target) as channel:
            demo, operator = Agent(channel, _token(tmp_path, "demo-agent")), Agent(channel, _token(tmp_path, "admin"))
            refused = fails(demo.recall_keys, "alice", "drink")
            assert (refused.code, refused.reason) == (grpc.StatusCode.PERMISSION_DENIED, "VIEW_MISSING")
            missing = fails(operator.call, "GetView", admin.GetViewRequest(agent="demo-agent"))
            assert missing.code == grpc.StatusCode.NOT_FOUND
    finally:
        assert process.stop() == 0
