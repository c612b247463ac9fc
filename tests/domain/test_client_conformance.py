"""The Python client's conformance helpers, as clients/python/README.md describes them (the client
against servers: tests/clients/test_python_client.py)."""

from __future__ import annotations

import json


def test_conformance_helpers_follow_the_readme():
    from memoryd.client.conformance import lookup, substitute

    doc = json.loads('{"results": [{"memoryId": "a"}], "memories": []}')
    assert lookup(doc, "results[0].memoryId") == "a"
    assert (lookup(doc, "results.length"), lookup(doc, "memories.length"), lookup(doc, "absent.length")) == (1, 0, 0)
    assert lookup(doc, "results[3].memoryId") is None and lookup(doc, "indexed") is None
    assert substitute({"x": ["${a}-${b}"]}, {"a": 1, "b": "z"}) == {"x": ["1-z"]}


def test_fields_within_checks_a_repeated_field_or_one_message():
    """A watch step checks ``change.memory``, one message; a unary step a list of them."""
    from memoryd.client.conformance import check

    def problems(document: dict, path: str) -> list[str]:
        return check({"expect": {"fields_within": {path: ["id", "text"]}}}, document, None, {})

    assert problems({"change": {"memory": {"id": "m", "text": "t"}}}, "change.memory") == []
    assert problems({"change": {"memory": {"id": "m", "tags": ["x"]}}}, "change.memory") == [
        "change.memory carries ['tags'], only ['id', 'text'] allowed"]
    assert problems({"memories": [{"id": "m"}, {"key": "k"}]}, "memories") == [
        "memories[1] carries ['key'], only ['id', 'text'] allowed"]
