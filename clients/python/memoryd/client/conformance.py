"""The conformance runner (clients/conformance/README.md) for the Python client.

    python -m memoryd.client.conformance SCENARIO CONFIG

Runs every step of SCENARIO against the server of CONFIG through :class:`MemorydClient` and
prints one line per step, ``ok <n> <name>`` or ``FAIL <n> <name>: <why>``; exits 0 only if
every step passed.
"""

from __future__ import annotations

import json
import queue
import re
import sys
import threading
from collections import Counter
from typing import Any

from google.protobuf import json_format

from memoryd.v1 import memory_service_pb2 as svc

from ._errors import MemorydError
from ._options import RetryPolicy
from ._sync import MemorydClient
from ._watch import Watch

_VAR = re.compile(r"\$\{([^}]+)\}")
_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_MISSING = object()
_ENDED = object()
WAIT = 15.0
"""Seconds a ``next`` step waits for a change."""
OPEN = 2.0
"""Seconds an ``open`` step waits at most for the server to accept the stream (README)."""


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
        found = lookup(document, path)
        elements = [found] if isinstance(found, dict) else found or []  # a message, or a repeated field
        for i, element in enumerate(elements):
            extra = sorted(set(element) - set(allowed))
            if extra:
                where = f"{path}[{i}]" if isinstance(found, list) else path
                problems.append(f"{where} carries {extra}, only {allowed} allowed")
    return problems


class _Stream:
    """An open watch step: a thread reads the resuming iterator into a queue, so steps can wait
    for the next change with a time limit."""

    def __init__(self, watch: Watch) -> None:
        self.watch = watch
        self.received: queue.Queue[Any] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for message in self.watch:
                self.received.put(json_format.MessageToDict(message))
        except Exception as failed:  # handed to the step that reads next
            self.received.put(failed)
        self.received.put(_ENDED)

    def next(self, seconds: float) -> Any:
        """The next change, an error, ``_ENDED``, or None when nothing came in time."""
        try:
            return self.received.get(timeout=seconds)
        except queue.Empty:
            return None

    def close(self) -> None:
        self.watch.close()
        self._reader.join(WAIT)


def _save(step: dict[str, Any], response: dict[str, Any] | None, names: dict[str, Any]) -> list[str]:
    problems = []
    for name, path in step.get("save", {}).items():
        value = lookup(response or {}, path)
        if value is None:
            problems.append(f"nothing at {path} to save as {name}")
        names[name] = value
    return problems


def _read_step(step: dict[str, Any], streams: dict[str, _Stream], names: dict[str, Any]) -> list[str]:
    """A ``next`` or ``none`` step on an open watch."""
    waiting = "next" in step
    stream = streams[step["next"] if waiting else step["none"]]
    seconds = WAIT if waiting else float(step["seconds"])
    got = stream.next(seconds)
    if not waiting:
        return [] if got is None else [f"expected nothing within {seconds:g} s, got {json.dumps(got, default=str)}"]
    if got is None:
        return [f"no change within {WAIT:g} s"]
    if got is _ENDED:
        return ["the stream ended"]
    if isinstance(got, Exception):
        return [f"the stream failed: {got}"]
    return check(step, got, None, names) or _save(step, got, names)


def _open_step(step: dict[str, Any], client: MemorydClient, request: Any, streams: dict[str, _Stream],
               names: dict[str, Any]) -> list[str]:
    """An ``open`` step: start the client's resuming watch under the step's name. Expecting an
    error, the first message is read to surface it; otherwise the step waits until the server
    accepted the stream (at most ``OPEN`` seconds), so the next steps' writes reach it."""
    watch = client.watch(request)
    if step.get("expect", {}).get("code", "OK") != "OK":
        stream = _Stream(watch)
        got = stream.next(WAIT)
        stream.close()
        if isinstance(got, MemorydError):
            return check(step, None, got, names)
        return check(step, got if isinstance(got, dict) else None, None, names)
    watch.wait_open(OPEN)  # False only tells that the server sends its headers late (README)
    streams[step["open"]] = _Stream(watch)
    return []


def _step(step: dict[str, Any], config: dict[str, Any], clients: dict[str, MemorydClient],
          streams: dict[str, _Stream], names: dict[str, Any]) -> list[str]:
    """Run one step; what did not hold."""
    if "next" in step or "none" in step:
        return _read_step(step, streams, names)
    if "close" in step:
        streams.pop(step["close"]).close()
        return []
    caller = step["caller"]
    if caller not in clients:
        token = config["tokens"][caller]
        clients[caller] = MemorydClient(config["target"], token=token or None, retry=RetryPolicy(max_attempts=3))
    method, request_type = _service_method(step["rpc"])
    request = json_format.ParseDict(substitute(step.get("request", {}), names), request_type())
    if "open" in step:
        return _open_step(step, clients[caller], request, streams, names)
    response: dict[str, Any] | None = None
    error: MemorydError | None = None
    try:
        response = json_format.MessageToDict(getattr(clients[caller], method)(request))
    except MemorydError as failed:
        error = failed
    return check(step, response, error, names) or _save(step, response, names)


def run(scenario: dict[str, Any], config: dict[str, Any], out: Any = sys.stdout) -> bool:
    """Run every step; print one line each; return whether all passed."""
    names: dict[str, Any] = dict(config.get("vars", {}))
    clients: dict[str, MemorydClient] = {}
    streams: dict[str, _Stream] = {}
    passed = True
    try:
        for n, step in enumerate(scenario["steps"], 1):
            try:
                problems = _step(step, config, clients, streams, names)
            except Exception as broken:  # a malformed step fails that step, not the run
                problems = [f"{type(broken).__name__}: {broken}"]
            if problems:
                passed = False
                print(f"FAIL {n} {step.get('name', '')}: " + "; ".join(problems), file=out, flush=True)
            else:
                print(f"ok {n} {step['name']}", file=out, flush=True)
    finally:
        for stream in streams.values():
            stream.close()
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
