"""Fixtures of the client toolchain tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..support import ServerProcess


@pytest.fixture
def fast_heartbeat_server(server: ServerProcess, tmp_path: Path) -> Iterator[ServerProcess]:
    """A replica of the suite's server (its database and keys) whose idle streams get a heartbeat
    every second, so a stream's first message, a heartbeat, comes soon and a silent connection
    shows in seconds."""
    config = tmp_path / "memoryd.toml"
    config.write_text("[watch]\nheartbeat_seconds = 1\n")
    master_key = Path(server.env["MEMORYD_DATA_DIR"]) / "keys" / "master.key"
    env = {**server.env, "MEMORYD_DATA_DIR": str(tmp_path), "MEMORYD_CONFIG": str(config),
           "MEMORYD_KEY_FILE": str(master_key)}
    process = ServerProcess(env, tmp_path / "server.log").start()
    yield process
    process.stop()
