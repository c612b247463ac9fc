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
