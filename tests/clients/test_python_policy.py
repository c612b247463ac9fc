"""The Python client follows clients/conformance/policy.json: which methods it retries, and how."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from google.protobuf import message_factory

from memoryd.client import DEFAULT_TIMEOUT, RetryPolicy
from memoryd.client._options import prepare
from memoryd.v1 import memory_service_pb2, token_admin_service_pb2, view_admin_service_pb2

POLICY = json.loads((Path(__file__).resolve().parents[2] / "clients" / "conformance" / "policy.json").read_text())
FILES = (memory_service_pb2, view_admin_service_pb2, token_admin_service_pb2)


def _request(method: str):
    service_name, _, name = method.partition("/")
    for module in FILES:
        for service in module.DESCRIPTOR.services_by_name.values():
            if service.full_name == service_name:
                descriptor = service.methods_by_name[name].input_type
                return message_factory.GetMessageClass(descriptor)()
    raise AssertionError(f"{method} is in the policy but not in the contract")


def test_the_policy_names_every_method_of_the_contract():
    methods = {f"{s.full_name}/{m.name}" for module in FILES for s in module.DESCRIPTOR.services_by_name.values()
               for m in s.methods}
    assert methods == set(POLICY["methods"])


@pytest.mark.parametrize("method", sorted(POLICY["methods"]))
def test_each_method_is_retried_as_the_policy_says(method: str):
    rule = POLICY["methods"][method]["retry"]
    request = _request(method)
    _, retryable = prepare(method.rpartition("/")[2], request)
    if rule == "unless_expected_version":
        assert retryable
        request.expected_version = 3
        assert not prepare(method.rpartition("/")[2], request)[1]
    else:
        assert retryable == {"always": True, "never": False}[rule]


def test_the_retry_constants_are_the_policys():
    retry, policy = RetryPolicy(), POLICY["retry"]
    assert (retry.max_attempts, retry.initial_backoff, retry.max_backoff, retry.multiplier, retry.jitter) == (
        policy["max_attempts"], policy["initial_backoff_seconds"], policy["max_backoff_seconds"],
        policy["multiplier"], policy["jitter"])
    assert {c.name for c in retry.codes} == set(policy["codes"])
    assert DEFAULT_TIMEOUT == POLICY["deadline_seconds"]
    assert grpc.StatusCode.UNAVAILABLE in retry.codes
