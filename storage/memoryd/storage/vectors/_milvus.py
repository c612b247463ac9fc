"""The vector index on Milvus: one collection per embedding model, one partition per tenant.

Milvus holds ids, the scalar fields needed to filter, and the vector — never memory text or
values. Postgres stays the source of truth: every hit is re-read from Postgres (with the
exact view filter) before it is served, so a stale vector is never returned.

Two routing modes:

- ``partition`` (default): a partition per tenant, named from a hash of the tenant id,
  created on first write; searches name the partition.
- ``partition_key``: for more tenants than a collection's partition limit, the ``tenant``
  field is the partition key and Milvus routes by it.

In both modes every search, query and delete ALSO filters on the tenant in its expression:
defence in depth (Milvus Lite 3.2 ignores ``partition_name`` for some calls).

pymilvus's client is synchronous; all calls run on one dedicated thread so the event loop
never blocks and Milvus Lite (in-process) is only ever entered from one thread.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from memoryd.domain import CONTRACT, Internal, ReadFilter, Unavailable

from . import _lite_compaction as lite
from .._filters import filter_expression, literal, literal_list
from ._records import IndexedMemory, collection_name, partition_name

T = TypeVar("T")
_log = logging.getLogger("memoryd.storage.milvus")
ROUTING_MODES = ("partition", "partition_key")
# pymilvus retries failed calls for minutes unless given a timeout; these bound every call so
# an unreachable index fails fast (Recall then degrades to keywords, the outbox backs off).
CONNECT_TIMEOUT = 5.0
# Milvus Lite, a gRPC server in this process, keeps gRPC's default ping policy (5 min between pings
# without data): pymilvus's 10 s pings made memoryd log ENHANCE_YOUR_CALM. Loopback needs none.
LITE_CHANNEL = {"grpc.keepalive_time_ms": 2**31 - 1, "grpc.keepalive_permit_without_calls": False}
CALL_TIMEOUT = 10.0
SEARCH_TIMEOUT = 3.0
# How long Recall waits for the index, queueing included (see MilvusIndex._run).
RECALL_BUDGET = SEARCH_TIMEOUT + 0.5
BREAKER_SECONDS = 2.0
# Milvus's largest top-k.
MAX_SEARCH_LIMIT = 16_384
# How long a compaction of a Milvus server is waited for: by the background erasure round
# (``_erasure_recheck``), never by an Erase, which leaves a server's compaction to that round.
# With the server's default dataCoord.compaction.check.interval (10 s) a collection-wide
# compaction of many tenants' partitions takes minutes (tests/support_distributed.py).
COMPACTION_TIMEOUT = 240.0
COMPACTION_POLL = 0.5

_OUTAGE_CODES = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
_OUTAGE_WORDS = ("fail connecting", "server unavailable", "retry timeout", "connection", "timed out",
                 "deadline", "unavailable")


def _is_outage(exc: BaseException) -> bool:
    """Whether a pymilvus/gRPC error means the index cannot be reached (retry later), as
    opposed to Milvus refusing this particular call."""
    if isinstance(exc, (OSError, TimeoutError, grpc.FutureTimeoutError)):
        return True
    if isinstance(exc, grpc.RpcError):
        return exc.code() in _OUTAGE_CODES
    code = getattr(exc, "code", None)
    if code in _OUTAGE_CODES or code == 2:  # pymilvus Status.CONNECT_FAILED
        return True
    message = str(getattr(exc, "message", exc)).lower()
    return any(word in message for word in _OUTAGE_WORDS)


def _not_loaded(exc: BaseException) -> bool:
    """Milvus answered that the collection is not loaded (it restarted since we loaded it), or
    pymilvus gave up waiting for it to load: a restarted server loads a collection of many
    segments for minutes, and a process starting meanwhile must wait for it, not stop."""
    message = str(getattr(exc, "message", exc)).lower()
    return "not loaded" in message or "wait for loading collection timeout" in message


class MilvusIndex:
    """The vectors of one embedding model."""

    def __init__(self, uri: str, *, model_id: str, dim: int, routing: str = "partition", token: str = "",
                 seal_writes: bool | None = None) -> None:
        if routing not in ROUTING_MODES:
            raise ValueError(f"milvus routing must be one of {ROUTING_MODES}")
        self.uri = uri
        self.model_id = model_id
        self.dim = dim
        self.routing = routing
        self.collection = collection_name(model_id, routing)
        # Milvus Lite searches rows of a growing segment in pure Python (~300 ms for 6k rows, ~15-40
        # ms sealed): with Lite every write is sealed at once; a Milvus server seals by itself.
        # A Milvus Lite file of this process (not a server reached over the network): its
        # compaction is ours, quick and readable back (``compact``), so an Erase does it.
        self.local = not uri.startswith(("http://", "https://", "tcp://", "grpc://"))
        self._seal = seal_writes if seal_writes is not None else self.local
        self._token = token
        self._client: Any = None
        self._partitions: set[str] = set()
        self._down_until = 0.0
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memoryd-milvus")

    async def _run(self, fn: Callable[[], T], *, budget: float | None = None) -> T:
        """Run ``fn`` on the index's thread. With a ``budget`` (Recall's calls), give up after
        that many seconds — the call may be queued behind a reconnect, which loads the
        collection and can take many seconds after Milvus restarts — and answer Unavailable,
        so Recall degrades to keywords instead of missing its deadline; the abandoned call
        is skipped when its turn comes."""
        loop = asyncio.get_running_loop()
        # A circuit breaker: right after a failure, calls fail at once instead of queueing
        # behind each other on the index thread, so Recall degrades without waiting.
        if loop.time() < self._down_until:
            raise Unavailable("the vector index is unavailable")
        abandoned = threading.Event()

        def job() -> T:
            if abandoned.is_set():
                raise Unavailable("abandoned by its caller")
            return fn()

        future = loop.run_in_executor(self._executor, job)
        try:
            if budget is None:
                return await future
            return await asyncio.wait_for(asyncio.shield(future), budget)
        except TimeoutError:
            abandoned.set()
            future.add_done_callback(lambda f: f.cancelled() or f.exception())  # never "never retrieved"
            _log.warning("vector index call gave up after %.1fs (the index is busy or reconnecting)", budget)
            raise Unavailable("the vector index is slow to answer") from None
        except (Internal, Unavailable):
            raise
        except Exception as exc:
            if _not_loaded(exc):
                # Milvus restarted and came back with the collection released: reconnect,
                # which loads it, on the next call; until then the index is unavailable.
                self._client = None
                self._down_until = loop.time() + BREAKER_SECONDS
                _log.warning("the vector index's collection is not loaded (Milvus restarted?); reloading")
                raise Unavailable("the vector index is reloading") from exc
            if not _is_outage(exc):
                # Milvus answered and refused this call (bad data, schema): a bug or a poison
                # item, not an outage — the outbox spends an attempt on it, the breaker stays shut.
                _log.error("the vector index refused a call: %s", exc)
                raise Internal("the vector index refused the call") from exc
            self._client = None  # reconnect on the next call
            self._down_until = loop.time() + BREAKER_SECONDS
            _log.warning("vector index call failed: %s", type(exc).__name__)
            raise Unavailable("the vector index is unavailable") from exc

    def _connect(self) -> Any:
        if self._client is not None:
            return self._client
        from pymilvus import MilvusClient

        client = MilvusClient(uri=self.uri, token=self._token, timeout=CONNECT_TIMEOUT,
                              **({"grpc_options": LITE_CHANNEL} if self.local else {}))
        if not client.has_collection(self.collection, timeout=CALL_TIMEOUT):
            try:
                self._create_collection(client)
            except Exception:
                # Replicas and workers starting together race to create it: losing is fine.
                if not client.has_collection(self.collection, timeout=CALL_TIMEOUT):
                    raise
        self._load(client)
        if self._seal:
            client.flush(self.collection, timeout=CALL_TIMEOUT)  # rows a previous run left unsealed
        self._client = client
        self._partitions = set(client.list_partitions(self.collection, timeout=CALL_TIMEOUT))
        return client

    def _load(self, client: Any) -> None:
        """Load the collection (a reopened one comes back released). Another process that
        has just created it may not have built its index yet ("index not found"): wait."""
        deadline = time.monotonic() + CALL_TIMEOUT
        while True:
            try:
                client.load_collection(self.collection, timeout=CALL_TIMEOUT)
                return
            except Exception as exc:
                if "index not found" not in str(getattr(exc, "message", exc)).lower() or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _create_collection(self, client: Any) -> None:
        from pymilvus import DataType

        schema = client.create_schema(auto_id=False, enable_dynamic_field=False,
                                      description=f"memoryd vectors of {self.model_id}")
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=CONTRACT.memory_id_chars)
        schema.add_field("tenant", DataType.VARCHAR, max_length=CONTRACT.tenant.max_bytes,
                         is_partition_key=self.routing == "partition_key")
        schema.add_field("subject", DataType.VARCHAR, max_length=CONTRACT.subject.max_bytes)
        schema.add_field("scope", DataType.VARCHAR, max_length=8)
        schema.add_field("session_id", DataType.VARCHAR, max_length=CONTRACT.session_id.max_bytes)
        schema.add_field("category", DataType.VARCHAR, max_length=16)
        schema.add_field("key", DataType.VARCHAR, max_length=CONTRACT.key.max_bytes)
        schema.add_field("tags", DataType.ARRAY, element_type=DataType.VARCHAR, max_capacity=CONTRACT.tags,
                         max_length=CONTRACT.tag_bytes)
        schema.add_field("status", DataType.VARCHAR, max_length=10)
        schema.add_field("updated_at", DataType.INT64)
        schema.add_field("valid_until", DataType.INT64)
        schema.add_field("vec", DataType.FLOAT_VECTOR, dim=self.dim)
        index = client.prepare_index_params()
        index.add_index("vec", index_type="AUTOINDEX", metric_type="COSINE")
        client.create_collection(self.collection, schema=schema, index_params=index, timeout=CALL_TIMEOUT)

    def _engine(self) -> Any | None:
        """Milvus Lite's collection object when the index is a Lite file of this process.

        Recall's reads call it directly: through pymilvus the same search is serialised to
        protobuf, sent over an in-process gRPC server, decoded by Lite's servicer and the
        answer encoded and decoded again — measured on one LoCoMo conversation (419 rows,
        75 hits with their vectors), that round trip was more than half of the index's time
        (bench/RESULTS.md, issue 14). Writes, deletes and flushes keep going through pymilvus.
        """
        return lite.lite_collection(self.uri, self.collection)

    def partition(self, tenant: str) -> IndexPartition:
        """The index as ``tenant``'s: every call of the view reads and writes its vectors only."""
        return IndexPartition(self, tenant, partition_name(tenant))

    def _partition(self, client: Any, part: IndexPartition, create: bool) -> list[str] | None:
        """The partitions to name for ``part``'s tenant (None in partition-key mode)."""
        if self.routing == "partition_key":
            return None
        name = part.name
        if name not in self._partitions:
            # Another process (a replica, a worker, a reindex) may have created it since we
            # connected: ask Milvus before concluding the tenant has nothing.
            if not client.has_partition(self.collection, name, timeout=CALL_TIMEOUT):
                if not create:
                    return []  # nothing was ever written for this tenant
                client.create_partition(self.collection, name, timeout=CALL_TIMEOUT)
            self._partitions.add(name)
        return [name]

    async def ping(self) -> None:
        await self._run(lambda: self._connect().get_load_state(self.collection, timeout=CALL_TIMEOUT))

    async def upsert_tenants(self, batch: dict[str, tuple[list[IndexedMemory], list[list[float]]]], *,
                             seal: bool = True) -> None:
        """Insert or replace the vectors of several tenants' memories, then read all of them
        back with ONE strong query: on a Milvus server a strong read waits for the index's
        timestamp (~300 ms), so the outbox worker confirms a whole batch at once, not one
        tenant at a time.

        ``seal=False`` leaves sealing to a later ``seal()``: a writer of many small batches
        (the outbox worker) seals once for all of them, since every Milvus Lite flush rewrites
        its manifest and grows with the number of segments. Unsealed rows are already searchable.
        """
        batch = {t: (items, vectors) for t, (items, vectors) in batch.items() if items}
        if not batch:
            return
        for items, vectors in batch.values():
            if len(items) != len(vectors) or any(len(v) != self.dim for v in vectors):
                raise Internal("vector count or dimension does not match the index")

        wanted = {(t, m.id) for t, (items, _) in batch.items() for m in items}

        def call() -> set[tuple[str, str]]:
            client = self._connect()
            # Milvus Lite keeps the newest version of a primary key, so inserting a whole row
            # replaces it; its upsert would first look every id up in every segment (to merge
            # partial rows, which memoryd never writes): ~1/3 of the worker's time once the
            # store holds 200,000 rows (bench/RESULTS.md). A server's insert would duplicate.
            replace_by_insert = lite.lite_collection(self.uri, self.collection) is not None
            partitions: list[str] = []
            for tenant, (items, vectors) in batch.items():
                ids = [m.id for m in items]
                rows = [{"id": m.id, "tenant": tenant, "subject": m.subject, "scope": m.scope,
                         "session_id": m.session_id, "category": m.category, "key": m.key, "tags": list(m.tags),
                         "status": "active", "updated_at": math.floor(m.updated_at.timestamp()),
                         "valid_until": math.floor(m.valid_until.timestamp()) if m.valid_until else 0, "vec": vector}
                        for m, vector in zip(items, vectors)]
                named = self._partition(client, self.partition(tenant), create=True)
                if named is None:
                    # Partition-key routing: a Milvus 2.3 server's upsert ignores the partition
                    # key and puts the rows where no tenant-filtered search looks; delete and
                    # insert route by the key on every version.
                    client.delete(self.collection, filter=f"id in {literal_list(ids)}", timeout=CALL_TIMEOUT)
                    client.insert(self.collection, rows, timeout=CALL_TIMEOUT)
                else:
                    write = client.insert if replace_by_insert else client.upsert
                    write(self.collection, rows, partition_name=named[0], timeout=CALL_TIMEOUT)
                    partitions.extend(named)
            if self._seal and seal:
                client.flush(self.collection, timeout=CALL_TIMEOUT)
            # Read the writes back (strong consistency) before the outbox lets go of the work:
            # an outbox row is only settled once its vector is where a search of its tenant
            # looks — by partition, or through the partition key (the tenant in the filter).
            wanted_ids = literal_list(sorted({i for _, i in wanted}))
            if self.routing == "partition_key":
                readback = f"tenant in {literal_list(sorted(batch))} and id in {wanted_ids}"
            else:
                readback = f"id in {wanted_ids}"  # a bare primary-key expression (see ``vectors``)
            kept = client.query(self.collection, filter=readback, output_fields=["id", "tenant"],
                                partition_names=sorted(set(partitions)) or None, timeout=CALL_TIMEOUT,
                                consistency_level="Strong")
            return {(str(r.get("tenant")), str(r["id"])) for r in kept}

        kept = await self._run(call)
        if not wanted <= kept:
            raise Unavailable("the vector index did not keep a write; it will be retried")

    async def seal(self) -> None:
        """Seal rows written with ``upsert(seal=False)`` (Milvus Lite only: a server seals
        segments itself)."""
        if self._seal:
            await self._run(lambda: self._connect().flush(self.collection, timeout=CALL_TIMEOUT))

    async def compact(self, timeout: float = COMPACTION_TIMEOUT) -> bool | None:
        """Remove deleted rows physically from the index's files: True once that is known done,
        False if not confirmed within ``timeout`` (it goes on), None where it never can be.

        Milvus Lite of this process: its compaction is rewritten here (``_lite_compaction``:
        ``compact()`` is a no-op there that answers success). A Milvus server: flush the
        deletes (which also seals every growing segment: the caller batches erases so that
        this happens once a round, not once an erase), ``compact`` the collection (a server
        compacts whole collections) and wait for ``get_compaction_state`` to say Completed;
        the server keeps the old segment files in its object storage until its own garbage
        collection, which no client can see. A ``milvus-lite server`` answers Completed
        without compacting anything: None.
        """
        def start() -> int | None:
            client = self._connect()
            client.flush(self.collection, timeout=CALL_TIMEOUT)  # the deletes reach the tombstones
            collection = lite.lite_collection(self.uri, self.collection)
            if collection is not None:
                lite.scrub(collection)
                return None
            if str(client.get_server_version(timeout=CALL_TIMEOUT)).startswith("milvus_lite"):
                return -1
            return int(client.compact(self.collection, timeout=CALL_TIMEOUT))

        job = await self._run(start)
        if job is None:
            return True
        if job < 0:
            return None
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            state = await self._run(lambda: self._connect().get_compaction_state(job, timeout=CALL_TIMEOUT))
            if state == "Completed":
                return True
            await asyncio.sleep(COMPACTION_POLL)  # poll off the index thread: searches go on meanwhile
        return False

    async def residue(self, ids: list[str]) -> set[str] | None:
        """Which of ``ids`` the index's files still hold, read back from disk; None where this
        process cannot read them (a Milvus server).

        An index sidecar whose segment is gone may be one Lite's background build wrote for a
        segment the compaction had just removed: then Lite's worker is waited for (off the
        index thread), the sidecars without a segment are removed and the files read again."""
        def call() -> tuple[set[str], set[str]] | None:
            self._connect()
            collection = lite.lite_collection(self.uri, self.collection)
            return None if collection is None else lite.residue(collection, ids)

        checked = await self._run(call)
        if checked is None:
            return None
        if any(lite.is_sidecar(kind) for kind in checked[1]):
            collection = lite.lite_collection(self.uri, self.collection)
            if collection is not None and await asyncio.to_thread(lite.settle_sidecars, collection):
                checked = await self._run(call) or checked
        found, kinds = checked
        if found:
            _log.warning("purged ids still in Milvus Lite files of kinds: %s", ", ".join(sorted(kinds)))
        return found

    async def close(self) -> None:
        def call() -> None:
            if self._client is not None:
                self._client.close()
                self._client = None

        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, call)
        finally:
            self._executor.shutdown(wait=True)


@dataclass(frozen=True)
class IndexPartition:
    """One tenant's vectors in the index (``MilvusIndex.partition``): each call names the
    tenant's partition and filters on the tenant in its expression too."""

    index: MilvusIndex
    tenant: str
    name: str  # of its partition (``partition_name``)

    async def upsert(self, items: list[IndexedMemory], vectors: list[list[float]], *, seal: bool = True) -> None:
        """Insert or replace the items' vectors, and read them back before returning."""
        await self.index.upsert_tenants({self.tenant: (items, vectors)}, seal=seal)

    async def delete(self, ids: list[str]) -> int:
        if not ids:
            return 0
        expr = f"tenant == {literal(self.tenant)} and id in {literal_list(ids)}"
        return await self.index._run(lambda: self._delete(expr))

    async def delete_subject(self, subject: str) -> int:
        expr = f"tenant == {literal(self.tenant)} and subject == {literal(subject)}"
        return await self.index._run(lambda: self._delete(expr))

    def _delete(self, expr: str) -> int:
        client = self.index._connect()
        partitions = self.index._partition(client, self, create=False)
        if partitions == []:
            return 0
        result = client.delete(self.index.collection, filter=expr, partition_name=partitions[0] if partitions else None,
                               timeout=CALL_TIMEOUT)
        if self.index._seal:
            client.flush(self.index.collection, timeout=CALL_TIMEOUT)
        return int(result.get("delete_count", 0)) if isinstance(result, dict) else len(result or [])

    async def count(self, *, ids: list[str] | None = None, subject: str | None = None) -> int:
        """How many vectors of the tenant remain: of ``ids``, of ``subject`` ('' is the
        organisation's), or of either when both are given (one strong read, not two: a purge
        of a whole subject checks both)."""
        which = ([f"id in {literal_list(ids)}"] if ids else []) + (
            [f"subject == {literal(subject)}"] if subject is not None else [])
        if ids is not None and not which:
            return 0
        expr = f"tenant == {literal(self.tenant)}" + (f" and ({' or '.join(which)})" if which else "")

        def call() -> int:
            client = self.index._connect()
            partitions = self.index._partition(client, self, create=False)
            if partitions == []:
                return 0
            # Strong: a Milvus server answers a default (bounded) read from before a delete it
            # has just acknowledged — a purge's check would count the deleted vectors.
            rows = client.query(self.index.collection, filter=expr, output_fields=["count(*)"],
                                partition_names=partitions, timeout=CALL_TIMEOUT, consistency_level="Strong")
            return int(rows[0]["count(*)"]) if rows else 0

        return await self.index._run(call)

    async def search(self, flt: ReadFilter, vector: list[float], limit: int,
                     now: datetime) -> list[tuple[str, float, list[float]]]:
        """(id, cosine similarity, vector) of the ``limit`` nearest memories that pass the
        labelled filter (``_filters.filter_expression``, filter first: exact, so the hits are
        the nearest of exactly what the filter admits, whatever else the partition holds)."""
        expr = filter_expression(self, flt, now)

        def call() -> list[tuple[str, float, list[float]]]:
            client = self.index._connect()
            partitions = self.index._partition(client, self, create=False)
            if partitions == []:
                return []
            engine = self.index._engine()
            if engine is not None:
                hits = engine.search([vector], top_k=min(limit, MAX_SEARCH_LIMIT), metric_type="COSINE",
                                     partition_names=partitions, expr=expr, output_fields=["vec"])[0]
            else:
                hits = client.search(self.index.collection, [vector], limit=min(limit, MAX_SEARCH_LIMIT), filter=expr,
                                     output_fields=["vec"], partition_names=partitions,
                                     search_params={"metric_type": "COSINE"}, timeout=SEARCH_TIMEOUT)[0]
            return [(str(h["id"]), float(h["distance"]), list(h["entity"]["vec"])) for h in hits]

        return await self.index._run(call, budget=RECALL_BUDGET)

    async def vectors(self, ids: list[str]) -> dict[str, list[float]]:
        if not ids:
            return {}
        # A pure primary-key expression, the tenant checked on each row returned instead: Milvus
        # Lite answers `id in [...]` alone from its key index (~1 ms) but scans the whole
        # partition for any other expression (~18 ms at 10k rows of one tenant).
        expr = f"id in {literal_list(ids)}"

        def call() -> dict[str, list[float]]:
            client = self.index._connect()
            partitions = self.index._partition(client, self, create=False)
            if partitions == []:
                return {}
            engine = self.index._engine()
            if engine is not None:
                rows = engine.get(list(ids), partition_names=partitions, output_fields=["id", "tenant", "vec"])
            else:
                rows = client.query(self.index.collection, filter=expr, output_fields=["id", "tenant", "vec"],
                                    partition_names=partitions, timeout=SEARCH_TIMEOUT)
            return {str(r["id"]): list(r["vec"]) for r in rows if r.get("tenant") == self.tenant}

        return await self.index._run(call, budget=RECALL_BUDGET)
