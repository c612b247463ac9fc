"""MemorydStore: LangGraph's long-term ``BaseStore`` on a memoryd server, through the caller's token."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from .._sync import MemorydClient
from ._mapping import (
    item_data,
    matches_filter,
    memory_key,
    namespace_matches,
    namespace_tags,
    prefix_tag,
    stored_item,
    value_text,
)

__all__ = ["MemorydStore", "CATEGORIES"]

# The keyed categories whose new value replaces the current one (the old kept as a version):
# what a put by key means. Constraints accumulate and events take no key.
CATEGORIES = {"fact": pb.CATEGORY_FACT, "preference": pb.CATEGORY_PREFERENCE, "goal": pb.CATEGORY_GOAL,
              "context": pb.CATEGORY_CONTEXT}
_MAX_ITEMS = 100  # Write items, filter keys and Recall top_k: the server's default limits
_PAGE = 500  # MemoryView's largest page


class MemorydStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are memoryd memories (docs/langgraph.md).

        from memoryd.client import MemorydClient
        from memoryd.client.langgraph import MemorydStore

        client = MemorydClient("127.0.0.1:50051", token=token)
        store = MemorydStore(client, subject_at=1)        # ("memories", <user id>, ...)
        store.put(("memories", "alice"), "food", {"text": "Alice loves Lyon's bouchons"})
        store.search(("memories", "alice"), query="where does alice like to eat?")

    Every call is one of the client's RPCs, so it carries the client's token and the server applies
    that agent's view: what the view hides, get/search/list_namespaces do not return, and what it
    may not write or erase fails with the server's error (a ``MemorydError``).

    Args:
        client: the blocking client to call memoryd with (the store does not close it).
        subject: the memoryd subject every namespace belongs to; or
        subject_at: the position of the namespace label that names the subject (``1`` for
            ``("memories", user_id)``). Exactly one of the two.
        category: the memoryd category of the items: ``fact`` (the default), ``preference``,
            ``goal`` or ``context`` — it decides their time to live (docs/concepts.md) and which
            view rules apply.
        index_fields: the value's paths whose text memoryd searches (LangGraph's index
            ``fields``; ``["$"]``, the default, is the whole value as JSON).
        ttl: LangGraph's TTL settings (``default_ttl`` in minutes); ``refresh_on_read`` has no
            effect (docs/langgraph.md).
        min_relevance: the least relevance a query search returns (memoryd's ``min_relevance``);
            0, the default, ranks every candidate like LangGraph's stores.
        wait_indexed: puts return once the items are searchable by meaning (default True).
    """

    supports_ttl = True

    def __init__(self, client: MemorydClient, *, subject: str | None = None, subject_at: int | None = None,
                 category: str = "fact", index_fields: Sequence[str] = ("$",), ttl: TTLConfig | None = None,
                 min_relevance: float = 0.0, wait_indexed: bool = True) -> None:
        if (subject is None) == (subject_at is None):
            raise ValueError("MemorydStore takes subject= (one subject for every namespace) or subject_at= "
                             "(the namespace label that names it), exactly one")
        if subject_at is not None and subject_at < 0:
            raise ValueError("subject_at is a position in the namespace, from 0")
        if category not in CATEGORIES:
            raise ValueError(f"category must be one of {', '.join(CATEGORIES)}, got {category!r}")
        self.client = client
        self.subject = subject
        self.subject_at = subject_at
        self.category = CATEGORIES[category]
        self.index_fields = list(index_fields)
        self.ttl_config = ttl
        self.min_relevance = min_relevance
        self.wait_indexed = wait_indexed

    # --- BaseStore ------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops``; as in InMemoryStore, reads see the state before the batch's writes."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        results: list[Result] = [None] * len(ops)
        gets: dict[str, list[tuple[int, GetOp]]] = {}
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                gets.setdefault(self._subject_of(op.namespace), []).append((i, op))
            elif isinstance(op, SearchOp):
                results[i] = self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list_namespaces(op)
            elif isinstance(op, PutOp):
                puts[(tuple(op.namespace), op.key)] = op  # the last put of a key wins, as in InMemoryStore
            else:
                raise ValueError(f"unknown operation {type(op).__name__}")
        for subject, entries in gets.items():
            found = self._get(subject, [(tuple(op.namespace), op.key) for _, op in entries])
            for i, op in entries:
                results[i] = found.get((tuple(op.namespace), op.key))
        self._apply(list(puts.values()))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # As LangGraph's synchronous stores do (PostgresStore): the blocking calls run in the
        # loop's executor, so the loop goes on meanwhile; ``batch`` works inside a loop too.
        ops = list(ops)
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, ops)

    # --- the mapping onto memoryd's calls ---------------------------------------------------

    def _subject_of(self, namespace: Sequence[str]) -> str:
        if self.subject is not None:
            return self.subject
        at = self.subject_at if self.subject_at is not None else 0
        if len(namespace) <= at or namespace[at] == "*":
            raise ValueError(f"MemorydStore(subject_at={at}) reads the memoryd subject from label {at + 1} of the "
                             f"namespace, and {tuple(namespace)!r} does not name it: memoryd lists and searches "
                             "one subject at a time")
        return namespace[at]

    def _filter(self, prefix: Sequence[str], keys: Sequence[str] = ()) -> pb.MemoryFilter:
        return pb.MemoryFilter(categories=[self.category], tags=[prefix_tag(prefix)], keys=list(keys))

    def _get(self, subject: str, wanted: list[tuple[tuple[str, ...], str]]) -> dict[tuple[tuple[str, ...], str],
                                                                                   Item]:
        by_key = {memory_key(ns, key): (ns, key) for ns, key in wanted}
        keys = sorted(by_key)
        found: dict[tuple[tuple[str, ...], str], Item] = {}
        for start in range(0, len(keys), _MAX_ITEMS):
            chunk = keys[start:start + _MAX_ITEMS]
            for memory in self.client.iter_memories(subject=subject, filter=self._filter((), chunk), page_size=_PAGE):
                stored = stored_item(memory)
                # The item must say it is the one asked for: a hashed key, or a memory some
                # other writer gave a key of ours, answers nothing.
                if stored and by_key.get(memory.key) == (stored.namespace, stored.key):
                    found[(stored.namespace, stored.key)] = stored
        return found

    def _scan(self, subject: str, prefix: Sequence[str]) -> Iterator[Item]:
        """Every item under ``prefix`` of the subject the view reads, most recently updated first."""
        for memory in self.client.iter_memories(subject=subject, filter=self._filter(prefix), page_size=_PAGE):
            stored = stored_item(memory)
            if stored and stored.namespace[:len(prefix)] == tuple(prefix):
                yield stored

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        subject = self._subject_of(prefix)
        if op.limit <= 0:
            return []
        end = op.offset + op.limit
        if not op.query:
            kept: list[SearchItem] = []
            for stored in self._scan(subject, prefix):
                if matches_filter(stored.value, op.filter):
                    kept.append(_search_item(stored, None))
                    if len(kept) >= end:
                        break
            return kept[op.offset:end]
        # Recall ranks at most top_k candidates: with a filter the best _MAX_ITEMS are fetched and
        # filtered here, so a filter that few of them pass finds fewer (docs/langgraph.md).
        top_k = _MAX_ITEMS if op.filter else min(end, _MAX_ITEMS)
        answer = self.client.recall(
            subject=subject, query=op.query, filter=self._filter(prefix), top_k=top_k,
            min_relevance=self.min_relevance, exclude_neighbours=True,
            weights=svc.ScoreWeights(similarity=1.0, recency=0.0, importance=0.0))
        ranked = []
        for scored in answer.memories:
            hit = stored_item(scored.memory)
            if hit and hit.namespace[:len(prefix)] == prefix and matches_filter(hit.value, op.filter):
                ranked.append(_search_item(hit, scored.score))
        return ranked[op.offset:end]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = list(op.match_conditions or ())
        prefix: tuple[str, ...] = ()
        for condition in conditions:
            if condition.match_type == "prefix":
                # The labels before the first wildcard narrow the scan on the server (a tag).
                path = tuple(condition.path)
                fixed = path[:path.index("*")] if "*" in path else path
                prefix = fixed if len(fixed) > len(prefix) else prefix
        subject = self._subject_of(_prefix_path(conditions))
        seen: set[tuple[str, ...]] = set()
        for stored in self._scan(subject, prefix):
            if all(namespace_matches(c, stored.namespace) for c in conditions):
                seen.add(stored.namespace[:op.max_depth] if op.max_depth is not None else stored.namespace)
        return sorted(seen)[op.offset:op.offset + op.limit]

    def _apply(self, puts: list[PutOp]) -> None:
        writes: dict[str, list[pb.MemoryDraft]] = {}
        named: dict[str, list[tuple[tuple[str, ...], str]]] = {}
        for op in puts:
            namespace, subject = tuple(op.namespace), self._subject_of(op.namespace)
            if op.value is None:
                # Deleting forgets the memory (kept for audit, never read again); a view that
                # may not erase it refuses, with the server's reason.
                self.client.erase(subject=subject, key=memory_key(namespace, op.key), mode=svc.ERASE_MODE_FORGET,
                                  reason="LangGraph store delete")
                continue
            writes.setdefault(subject, []).append(self._draft(op))
            named.setdefault(subject, []).append((namespace, op.key))
        consistency = svc.CONSISTENCY_WAIT_INDEXED if self.wait_indexed else svc.CONSISTENCY_INDEX_ASYNC
        for subject, drafts in writes.items():
            for start in range(0, len(drafts), _MAX_ITEMS):
                answer = self.client.write(subject=subject, items=drafts[start:start + _MAX_ITEMS],
                                           consistency=consistency)
                for (namespace, key), result in zip(named[subject][start:start + _MAX_ITEMS], answer.results):
                    if result.outcome in (svc.WRITE_OUTCOME_REJECTED, svc.WRITE_OUTCOME_PENDING):
                        raise ValueError(f"memoryd did not store {namespace!r}/{key!r}: "
                                         f"{svc.WriteOutcome.Name(result.outcome)}, {result.reason}")

    def _draft(self, op: PutOp) -> pb.MemoryDraft:
        assert op.value is not None
        fields = None if op.index is False else (self.index_fields if op.index is None else op.index)
        draft = pb.MemoryDraft(category=self.category, key=memory_key(op.namespace, op.key),
                               text=value_text(op.key, op.value, fields), tags=namespace_tags(op.namespace),
                               data=item_data(op.namespace, op.key, op.value, op.ttl))
        if op.ttl is not None:
            # A TTL is how long the value stays true (valid_until): memoryd reads nothing past it.
            draft.valid_until.FromDatetime(datetime.now(UTC) + timedelta(minutes=op.ttl))
        return draft


def _search_item(stored: Item, score: float | None) -> SearchItem:
    return SearchItem(namespace=stored.namespace, key=stored.key, value=stored.value, created_at=stored.created_at,
                      updated_at=stored.updated_at, score=score)


def _prefix_path(conditions: list[Any]) -> tuple[str, ...]:
    """The prefix condition's path, where the subject label is read from (``()`` if none)."""
    for condition in conditions:
        if condition.match_type == "prefix":
            return tuple(condition.path)
    return ()

