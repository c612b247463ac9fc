"""The pure folders keep their promise (tests/conftest.py): a test here that starts a process or a
gRPC server, or opens a network socket, fails, so `make test-fast` never starts anything."""

from __future__ import annotations

import socket
import subprocess

import grpc
import pytest


def test_a_pure_test_is_marked_pure(request: pytest.FixtureRequest):
    assert request.node.get_closest_marker("pure") is not None


def test_a_pure_test_cannot_start_a_process():
    with pytest.raises(pytest.fail.Exception, match="starts a process"):
        subprocess.run(["true"], check=False)


def test_a_pure_test_cannot_open_a_network_socket():
    with socket.socket() as sock, pytest.raises(pytest.fail.Exception, match="opens a network socket"):
        sock.bind(("127.0.0.1", 0))
    with socket.socket() as sock, pytest.raises(pytest.fail.Exception, match="opens a network socket"):
        sock.connect(("127.0.0.1", 9))


def test_a_pure_test_cannot_start_a_grpc_server():
    with pytest.raises(pytest.fail.Exception, match="starts a gRPC server"):
        grpc.server(None)  # type: ignore[arg-type]
    with pytest.raises(pytest.fail.Exception, match="starts a gRPC server"):
        grpc.aio.server()
