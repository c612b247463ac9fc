"""How MemorydStore names memories (memoryd.client.langgraph._mapping), alone: every namespace and
key gets a key and tags the contract accepts, and no two items share a key."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.client.langgraph._mapping import (
    MARKER_TAG,
    memory_key,
    namespace_tags,
    prefix_tag,
)

# The contract's rules for MemoryDraft.key and .tags (memory.proto's buf.validate annotations; the
# server refuses the same control characters in a tag).
KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")

labels = st.text(min_size=1, max_size=40).filter(lambda s: "." not in s and "\x00" not in s)
namespaces = st.lists(labels, min_size=1, max_size=6).map(tuple)
keys = st.text(max_size=120)


@settings(max_examples=300, deadline=None)
@given(namespaces, keys)
def test_every_item_gets_a_key_and_tags_memoryd_accepts(namespace: tuple[str, ...], key: str):
    mkey = memory_key(namespace, key)
    assert KEY.fullmatch(mkey) and len(mkey.encode()) <= 128 and mkey.startswith("lg/")
    tags = namespace_tags(namespace)
    assert tags[0] == MARKER_TAG and len(tags) == len(namespace) + 1 <= 32
    assert all(0 < len(t.encode()) <= 64 and not CONTROL.search(t) for t in tags)


@settings(max_examples=300, deadline=None)
@given(namespaces, keys, namespaces, keys)
def test_two_items_never_share_a_memory_key(ns1: tuple[str, ...], k1: str, ns2: tuple[str, ...], k2: str):
    if (ns1, k1) != (ns2, k2):
        assert memory_key(ns1, k1) != memory_key(ns2, k2)
    if ns1 != ns2:
        assert prefix_tag(ns1) != prefix_tag(ns2)


def test_plain_namespaces_stay_readable_for_view_patterns():
    assert memory_key(("users", "u-42", "prefs"), "theme") == "lg/users.u-42.prefs/theme"
    assert memory_key(("a/b",), "c") == "lg/a:2fb/c" and memory_key(("a",), "b/c") == "lg/a/b/c"
    assert memory_key(("my notes",), "k:1") == "lg/my:20notes/k:3a1"
    assert namespace_tags(("users", "u-42")) == ["langgraph", "lg:users", "lg:users.u-42"]
    assert memory_key(("users",), "k" * 200).startswith("lg/:h")  # too long: a hash, matched by no pattern
