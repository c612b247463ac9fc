"""The conformance runner (clients/conformance/README.md) for the Python client.

    python -m memoryd.client.conformance SCENARIO CONFIG

Runs every step of SCENARIO against the server of CONFIG through :class:`MemorydClient` and
prints one line per step, ``ok <n> <name>`` or ``FAIL <n> <name>: <why>``; exits 0 only if
every step passed.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from typing import Any

from google.protobuf import json_format

from memoryd.v1 import memory_service_pb2 as svc

from ._errors import MemorydError
from ._options import RetryPolicy
from ._sync import MemorydClient

_VAR = re.compile(r"\$\{([^}]+)\}")
_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_MISSING = object()


def substitute(value: Any, names: dict[str, Any]) -> Any:
    """Replace every ``${name}`` in the strings of ``value``."""
    if isinstance(value, str):
        def one(match: re.Match[str]) -> str:
            if match.group(1) not in names:
                raise KeyError(f"unknown variable ${{{match.group(1)}}}")
            return str(names[match.group(1)])
        return _VAR.sub(one, value)
    if isinstance(value, list):
        return [substitute(v, names) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, names) for k, v in value.items()}
    return value


def lookup(document: Any, path: str) -> Any:
    """The value at ``path`` (``a.b[0].c``; ``x.length`` counts x), or None when absent."""
    length = path.endswith(".length")
    if length:
        path = path[: -len(".length")]
    node = document
    for name, index in _SEGMENT.findall(path):
        if name:
            node = node.get(name, _MISSING) if isinstance(node, dict) else _MISSING
        else:
            i = int(index)
            node = node[i] if isinstance(node, list) and i < len(node) else _MISSING
        if node is _MISSING:
            break
    if length:
        return len(node) if isinstance(node, list) else 0
    return None if node is _MISSING else node


def _service_method(rpc: str) -> tuple[str, type[Any]]:
    method = svc.DESCRIPTOR.services_by_name["MemoryService"].methods_by_name[rpc]
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", rpc).lower()
    return snake, getattr(svc, method.input_type.name)


def check(step: dict[str, Any], response: dict[str, Any] | None, error: MemorydError | None,
          names: dict[str, Any]) -> list[str]:
    """Everything in ``step["expect"]`` that did not hold."""
    expect = step.get("expect", {})
    problems: list[str] = []
    code = error.code.name if error else "OK"
    if code != expect.get("code", "OK"):
        why = f": {error}" if error else ""
        return [f"code {code}, expected {expect.get('code', 'OK')}{why}"]
    if "reason" in expect:
        reason = error.reason if error else ""
        if reason != expect["reason"]:
            problems.append(f"reason {reason!r}, expected {expect['reason']!r}")
    if "violations" in expect:
        got = sorted(error.violations) if error else []
        if got != sorted(expect["violations"]):
            problems.append(f"violations {got}, expected {sorted(expect['violations'])}")
    document = response or {}
    for path, wanted in expect.get("equals", {}).items():
        wanted = substitute(wanted, names)
        got = lookup(document, path)
        if got != wanted:
            problems.append(f"{path} is {json.dumps(got)}, expected {json.dumps(wanted)}")
    for path, wanted in expect.get("texts", {}).items():
        elements = lookup(document, path) or []
        got_texts = Counter(e.get("text") for e in elements if isinstance(e, dict))
        if got_texts != Counter(substitute(wanted, names)):
            problems.append(f"{path} texts are {sorted(map(str, got_texts.elements()))}, expected {sorted(wanted)}")
    for path, allowed in expect.get("fields_within", {}).items():
        for i, element in enumerate(lookup(document, path) or []):
            extra = sorted(set(element) - set(allowed))
            if extra:
                problems.append(f"{path}[{i}] carries {extra}, only {allowed} allowed")
    return problems


def run(scenario: dict[str, Any], config: dict[str, Any], out: Any = sys.stdout) -> bool:
    """Run every step; print one line each; return whether all passed."""
    names: dict[str, Any] = dict(config.get("vars", {}))
    clients: dict[str, MemorydClient] = {}
    passed = True
    try:
        for n, step in enumerate(scenario["steps"], 1):
            try:
                caller = step["caller"]
                if caller not in clients:
                    token = config["tokens"][caller]
                    clients[caller] = MemorydClient(config["target"], token=token or None,
                                                    retry=RetryPolicy(max_attempts=3))
                method, request_type = _service_method(step["rpc"])
                request = json_format.ParseDict(substitute(step.get("request", {}), names), request_type())
                response: dict[str, Any] | None = None
                error: MemorydError | None = None
                try:
                    message = getattr(clients[caller], method)(request)
                    response = json_format.MessageToDict(message)
                except MemorydError as failed:
                    error = failed
                problems = check(step, response, error, names)
                if not problems:
                    for name, path in step.get("save", {}).items():
                        value = lookup(response or {}, path)
                        if value is None:
                            problems.append(f"nothing at {path} to save as {name}")
                        names[name] = value
            except Exception as broken:  # a malformed step fails that step, not the run
                problems = [f"{type(broken).__name__}: {broken}"]
            if problems:
                passed = False
                print(f"FAIL {n} {step.get('name', '')}: " + "; ".join(problems), file=out, flush=True)
            else:
                print(f"ok {n} {step['name']}", file=out, flush=True)
    finally:
        for client in clients.values():
            client.close()
    return passed


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m memoryd.client.conformance SCENARIO CONFIG", file=sys.stderr)
        return 2
    with open(args[0]) as scenario, open(args[1]) as config:
        return 0 if run(json.load(scenario), json.load(config)) else 1


if __name__ == "__main__":
    sys.exit(main())
