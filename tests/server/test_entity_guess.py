"""Recall starts embedding the query before the entity lookup answers, on the names it expects
(``_entity_guess``); a wrong guess costs time, never a different answer."""

from __future__ import annotations

from memoryd.v1 import memory_service_pb2 as svc

from ..support import draft

QUERY = "What pet did Ana adopt last spring?"


def answer(response: svc.RecallResponse) -> list[tuple[str, float, float, int, int]]:
    """What a guess could change: which memories, in which order, on which signals (the score
    itself moves with access reinforcement between calls)."""
    return [(m.memory.id, round(m.similarity, 5), round(m.relevance, 5), m.dense_rank, m.keyword_rank)
            for m in response.memories]


async def test_a_wrong_guess_and_a_right_one_give_the_same_answer(traced):
    stub, meta = traced.stub, traced.meta
    written = await stub.Write(svc.WriteRequest(subject="s", items=[
        draft("event", "Ana adopted a grey cat called Miso in April", tags=["entity:ana"]),
        draft("event", "Ana started a pottery class on Tuesdays", tags=["entity:ana"]),
        draft("event", "Bruno adopted a puppy from the shelter", tags=["entity:bruno"]),
        draft("fact", "The office plants are watered on Fridays")],
        consistency=svc.CONSISTENCY_WAIT_INDEXED), metadata=meta)

    async def ask() -> tuple[list[tuple[str, float, float, int, int]], bool]:
        response = await stub.Recall(svc.RecallRequest(subject="s", query=QUERY, top_k=4), metadata=meta)
        traced.app._provider.force_flush()  # the batch processor's spans so far, server still up
        embed = [s for s in traced.exporter.get_finished_spans() if s.name == "memoryd.embed"][-1]
        return answer(response), bool((embed.attributes or {})["memoryd.guessed"])

    # Nothing learned yet: "Ana" is guessed not to be an entity, the lookup finds it.
    first, guessed = await ask()
    assert not guessed and first
    again, guessed = await ask()
    assert guessed and again == first
    # Ana's memories gone: the guess says "entity:ana" still, the lookup says no.
    ana = [r.memory_id for r in written.results[:2]]
    await stub.Erase(svc.EraseRequest(subject="s", ids=svc.MemoryIds(ids=ana), mode=svc.ERASE_MODE_FORGET), metadata=meta)
    stale, guessed = await ask()
    assert not guessed and not {row[0] for row in stale} & set(ana)
    learned, guessed = await ask()
    assert guessed and learned == stale
