"""The Python client against the shared client policy (clients/conformance/policy.json): its
deadline, retry policy, per-method retry rules, page iterators and resuming watch are the ones
every memoryd client must have. Change the policy and this test says what the Python client must follow."""

from __future__ import annotations

import inspect
import json
import re
import uuid
from typing import Any

import grpc
import pytest
from google.protobuf import symbol_database

from memoryd.client import (
    DEFAULT_TIMEOUT,
    KEEPALIVE,
    WATCH_HEARTBEAT,
    WATCH_STALL_FACTOR,
    AsyncMemorydClient,
    AsyncWatch,
    Keepalive,
    MemorydClient,
    RetryPolicy,
    Watch,
)
from memoryd.client._options import prepare
from memoryd.server import Config
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import token_admin_service_pb2 as token_admin
from memoryd.v1 import view_admin_service_pb2 as admin

from ..support import ROOT

POLICY = json.loads((ROOT / "clients" / "conformance" / "policy.json").read_text())
SERVICES = [svc.DESCRIPTOR.services_by_name["MemoryService"], admin.DESCRIPTOR.services_by_name["ViewAdminService"],
            token_admin.DESCRIPTOR.services_by_name["TokenAdminService"]]
METHODS = {f"{service.full_name}/{method.name}": method for service in SERVICES for method in service.methods}
ITERATORS = {"memoryd.v1.MemoryService/MemoryView": "iter_memories", "memoryd.v1.ViewAdminService/ListViews": "iter_views"}


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def request_for(full_name: str, **fields: Any) -> Any:
    cls = symbol_database.Default().GetSymbol(METHODS[full_name].input_type.full_name)
    return cls(**fields)


def test_the_policy_names_exactly_the_rpcs_of_the_contract():
    assert set(POLICY["methods"]) == set(METHODS)


@pytest.mark.parametrize("client", [MemorydClient, AsyncMemorydClient], ids=["blocking", "asyncio"])
def test_each_client_has_a_method_for_every_rpc_and_the_page_iterators(client: type):
    for full_name in POLICY["methods"]:
        assert callable(getattr(client, snake(full_name.rpartition("/")[2]), None)), full_name
    assert set(POLICY["page_iterators"]) == set(ITERATORS)
    for name in ITERATORS.values():
        iterator = getattr(client, name)
        assert (inspect.isasyncgenfunction(iterator) if client is AsyncMemorydClient
                else inspect.isgeneratorfunction(iterator)), name


def test_the_default_deadline_and_retry_policy_are_the_policys():
    assert DEFAULT_TIMEOUT == POLICY["deadline_seconds"]
    retry, default = POLICY["retry"], RetryPolicy()
    assert default.codes == frozenset(grpc.StatusCode[code] for code in retry["codes"])
    assert default.max_attempts == retry["max_attempts"]
    assert default.initial_backoff == retry["initial_backoff_seconds"]
    assert default.max_backoff == retry["max_backoff_seconds"]
    assert default.multiplier == retry["multiplier"]
    assert default.jitter == retry["jitter"]
    for client in (MemorydClient, AsyncMemorydClient):
        assert inspect.signature(client).parameters["timeout"].default == POLICY["deadline_seconds"]


def test_backoff_follows_the_policys_formula():
    retry, default = POLICY["retry"], RetryPolicy()
    for n in range(1, 8):
        base = min(retry["max_backoff_seconds"], retry["initial_backoff_seconds"] * retry["multiplier"] ** (n - 1))
        waits = [default.backoff(n) for _ in range(200)]
        assert all(base * (1 - retry["jitter"]) - 1e-9 <= w <= base + 1e-9 for w in waits), n
        assert max(waits) - min(waits) > base * retry["jitter"] / 4  # jittered, not fixed


@pytest.mark.parametrize("full_name", sorted(POLICY["methods"]))
def test_each_rpc_is_retried_exactly_when_the_policy_says(full_name: str):
    rule = POLICY["methods"][full_name]["retry"]
    method = full_name.rpartition("/")[2]
    _, retryable = prepare(method, request_for(full_name))
    if rule == "always":
        assert retryable
    elif rule == "never":
        assert not retryable
    elif rule == "unless_expected_version":
        assert retryable
        assert not prepare(method, request_for(full_name, expected_version=3))[1]
    elif rule == "resume":  # a stream: the watch iterator re-opens it, it is not replayed as a call
        assert METHODS[full_name].server_streaming and not METHODS[full_name].client_streaming
        assert inspect.signature(MemorydClient.watch).return_annotation in ("Watch", Watch)
        assert inspect.signature(AsyncMemorydClient.watch).return_annotation in ("AsyncWatch", AsyncWatch)
    else:
        raise AssertionError(f"unknown retry rule {rule!r} for {full_name}: teach the Python client and this test")


def test_write_gets_one_idempotency_key_before_the_first_attempt_and_keeps_a_given_one():
    request = svc.WriteRequest(subject="alice")
    sent, _ = prepare("Write", request)
    assert uuid.UUID(sent.idempotency_key) and not request.idempotency_key  # the caller's message is not changed
    given = svc.WriteRequest(subject="alice", idempotency_key="mine")
    assert prepare("Write", given)[0].idempotency_key == "mine"


def test_only_the_resumed_rpcs_are_streams():
    """A streaming RPC with a unary retry rule would be called like a unary one, and break."""
    for full_name, method in METHODS.items():
        assert (POLICY["methods"][full_name]["retry"] == "resume") == (method.server_streaming or method.client_streaming), \
            full_name


def test_the_watch_heartbeat_and_stall_factor_are_the_policys():
    watch = POLICY["watch"]
    assert WATCH_HEARTBEAT == watch["heartbeat_seconds"] and WATCH_STALL_FACTOR == watch["stall_factor"]
    for client in (MemorydClient, AsyncMemorydClient):
        assert inspect.signature(client).parameters["heartbeat_interval"].default == watch["heartbeat_seconds"]
    # The iterator's silence limit is the factor times the interval it is given.
    with MemorydClient("127.0.0.1:1", heartbeat_interval=2.0) as client:
        assert client.watch(subject="alice")._resume.stall == WATCH_STALL_FACTOR * 2.0
        assert client.watch(subject="alice", heartbeat_interval=0.5)._resume.stall == WATCH_STALL_FACTOR * 0.5


def test_the_keepalive_is_the_policys_and_the_servers_default_permits_it():
    keepalive = POLICY["keepalive"]
    assert KEEPALIVE == Keepalive(time=keepalive["time_seconds"], timeout=keepalive["timeout_seconds"],
                                  permit_without_calls=keepalive["permit_without_calls"])
    for client in (MemorydClient, AsyncMemorydClient):
        assert inspect.signature(client).parameters["keepalive"].default is KEEPALIVE
    assert dict(KEEPALIVE.channel_options()) == {
        "grpc.keepalive_time_ms": keepalive["time_seconds"] * 1000,
        "grpc.keepalive_timeout_ms": keepalive["timeout_seconds"] * 1000,
        "grpc.keepalive_permit_without_calls": int(keepalive["permit_without_calls"]),
        "grpc.http2.max_pings_without_data": 0,  # keep pinging while idle, as the other clients do
    }
    # A server that counted a slightly early ping (timer slack) as a strike would send GOAWAY.
    server = Config().keepalive
    assert server.min_ping_interval_seconds == keepalive["server_min_ping_interval_seconds"]
    assert keepalive["time_seconds"] >= 2 * server.min_ping_interval_seconds
