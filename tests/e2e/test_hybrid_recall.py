"""Free-text Recall through gRPC: dense + keyword channels, real embedder, real Milvus Lite."""

from __future__ import annotations

import psycopg
import pytest

from memoryd.domain._policy import MIN_RELEVANCE
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from ..support import ALL_FIELDS, Agent, draft, full_view, unique, wait_until

WAIT = svc.CONSISTENCY_WAIT_INDEXED


def remember(agent: Agent, subject: str, *texts: str, category: str = "event") -> list[str]:
    response = agent.write(subject, *(draft(category, t) for t in texts), consistency=WAIT)
    assert response.indexed, "WAIT_INDEXED returned before the memories were searchable"
    return [r.memory_id for r in response.results]


def recall(agent: Agent, subject: str, query: str, **kwargs: object) -> svc.RecallResponse:
    return agent.call("Recall", svc.RecallRequest(subject=subject, query=query, **kwargs))


def texts(response: svc.RecallResponse) -> list[str]:
    return [m.memory.text for m in response.memories]


@pytest.mark.parametrize(
    ("memories", "query", "expected"),
    [
        (["每天早上喝绿茶", "Drives a red Volvo", "Her sister is a veterinarian in Porto", "Dislikes loud restaurants"],
         "what does she drink in the morning?", "每天早上喝绿茶"),
        (["Drives a red Volvo", "Her sister is a veterinarian in Porto", "Dislikes loud restaurants",
          "Travels to Shanghai for work next month"],
         "她开什么车", "Drives a red Volvo"),
        (["下个月去上海出差", "Drives a red Volvo", "Her sister is a veterinarian in Porto"],
         "where is the business trip next month?", "下个月去上海出差"),
    ],
    ids=["english-query-chinese-memory", "chinese-query-english-memory", "english-query-chinese-trip"],
)
def test_recall_finds_the_right_memory_across_languages(agent, memories, query, expected):
    remember(agent, "alice", *memories)

    response = recall(agent, "alice", query, top_k=1)

    assert texts(response) == [expected]
    assert response.memories[0].dense_rank == 1
    assert not response.degraded


def test_every_result_explains_its_score(agent):
    remember(agent, "alice", "Alice adopted a grey cat called Miso", "Alice plays the cello on Sundays")

    best = recall(agent, "alice", "Miso the cat", top_k=2).memories[0]

    assert best.memory.text == "Alice adopted a grey cat called Miso"
    assert best.keyword_rank == 1 and best.dense_rank == 1
    assert 0 < best.similarity <= 1 and 0 < best.recency <= 1
    expected = 0.65 * best.similarity + 0.25 * best.recency + 0.10 * best.importance
    assert best.score == pytest.approx(expected, abs=1e-4)


def test_a_query_nothing_answers_gets_an_empty_answer_and_no_block(agent):
    remember(agent, "alice", "Allergic to peanuts", "Her IBAN is FR76 3000 6000 0112 3456 7890 189",
             "Prefers window seats on trains")

    nothing = recall(agent, "alice", "What is the capital of Mongolia?", render_block=True)
    everything = recall(agent, "alice", "What is the capital of Mongolia?", min_relevance=0.0)

    assert texts(nothing) == [] and nothing.block == ""
    # Asked without a minimum, the best candidates still come back, each saying how weak it is.
    assert len(everything.memories) == 3
    assert all(m.relevance < MIN_RELEVANCE for m in everything.memories)


def test_relevance_is_absolute_and_comes_with_its_raw_signals(agent):
    remember(agent, "alice", "Alice adopted a grey cat called Miso", "Alice plays the cello on Sundays")

    best, other = recall(agent, "alice", "Miso the cat", top_k=2, min_relevance=0.0).memories
    cut = recall(agent, "alice", "Miso the cat", top_k=2)

    assert best.memory.text == "Alice adopted a grey cat called Miso"
    assert best.relevance >= MIN_RELEVANCE > other.relevance
    assert [m.memory.text for m in cut.memories] == [best.memory.text]
    assert best.HasField("cosine") and other.HasField("cosine") and 0 < other.cosine < best.cosine <= 1
    assert 0 < best.keyword_relevance <= 1 and other.keyword_relevance == 0
    # The relevance does not depend on what else was a candidate (similarity does).
    alone = recall(agent, "alice", "Miso the cat", top_k=1, min_relevance=0.0).memories[0]
    assert alone.relevance == pytest.approx(best.relevance)


def test_a_keyed_lookup_is_an_exact_match_whatever_the_minimum(agent):
    agent.write("alice", draft("preference", "oolong tea", key="drink"))

    [found] = agent.call("Recall", svc.RecallRequest(subject="alice", keys=["drink"], min_relevance=1.0)).memories

    assert found.memory.text == "oolong tea" and found.relevance == 1.0
    assert not found.HasField("cosine") and found.keyword_relevance == 0


def test_wait_indexed_makes_a_write_searchable_by_meaning_at_once(agent):
    response = agent.write("alice", draft("event", "Alice passed her driving test in Lisbon"), consistency=WAIT)

    assert response.indexed
    # A paraphrase without a shared word: below the default minimum relevance (chosen so that
    # off-topic questions get nothing, bench/RESULTS.md), so this asks without one.
    found = recall(agent, "alice", "exam for a car licence", top_k=1, min_relevance=0.0).memories
    assert [(m.memory.id, m.dense_rank > 0) for m in found] == [(response.results[0].memory_id, True)]


def test_another_tenants_near_identical_memory_never_comes_back(connect):
    a, b = connect(agent="a"), connect(agent="b", tenant=unique("tenant"))
    remember(a, "alice", "Alice's bank account is at Caixa in Porto")
    remember(b, "alice", "Alice's bank account is at Caixa in Porto, branch 12")

    for agent, own in ((a, "Alice's bank account is at Caixa in Porto"),
                       (b, "Alice's bank account is at Caixa in Porto, branch 12")):
        assert texts(recall(agent, "alice", "which bank does alice use", top_k=10)) == [own]


def test_another_subjects_memory_never_comes_back(agent):
    remember(agent, "alice", "Prefers window seats on long flights")
    remember(agent, "bob", "Prefers window seats on long flights, and aisle on short ones")

    assert texts(recall(agent, "alice", "seat preference on planes", top_k=10)) == [
        "Prefers window seats on long flights"]


def test_a_vector_whose_row_is_gone_is_never_returned(agent, postgres, tenant):
    kept, purged = remember(agent, "alice", "Alice collects vintage postcards", "Alice collects vintage stamps")
    # The row disappears behind the index's back (as if a purge had not reached Milvus yet).
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM memories WHERE tenant_id = %s AND id = %s", (tenant, purged))

    found = recall(agent, "alice", "vintage stamps collection", top_k=5).memories

    assert [m.memory.id for m in found] == [kept]


def test_mmr_keeps_near_duplicates_out_of_a_short_answer(agent):
    remember(agent, "alice", "Alice loves green tea.", "Alice really loves green tea!",
             "Alice loves green tea a lot", "Alice is allergic to peanuts")

    answer = texts(recall(agent, "alice", "Does Alice love green tea? Any peanut allergy?", top_k=2))

    assert "Alice is allergic to peanuts" in answer
    assert sum("green tea" in t for t in answer) == 1


def test_free_text_recall_respects_the_token_budget_and_top_k(agent):
    long_text = "Alice described her trip to Kyoto in great detail: temples, gardens, food. " * 6
    remember(agent, "alice", long_text, "Alice went to Kyoto in April", "Alice liked the Kyoto gardens")

    bounded = recall(agent, "alice", "Alice trip to Kyoto", top_k=2, token_budget=30)

    assert len(bounded.memories) == 2
    assert long_text not in texts(bounded)


def test_filters_apply_to_free_text_recall(agent):
    remember(agent, "alice", "Alice decided to switch to a standing desk", category="decision")
    remember(agent, "alice", "Alice bought a standing desk yesterday")

    only_decisions = recall(agent, "alice", "standing desk",
                            filter=pb.MemoryFilter(categories=[pb.CATEGORY_DECISION]))

    assert texts(only_decisions) == ["Alice decided to switch to a standing desk"]


def test_keyed_and_free_text_recall_combine(agent):
    agent.write("alice", draft("preference", "Python", key="primary_language"), consistency=WAIT)
    remember(agent, "alice", "Alice gave a talk about Rust at a meetup")

    response = agent.call("Recall", svc.RecallRequest(subject="alice", keys=["primary_language"],
                                                      query="Rust meetup talk", top_k=5))

    assert texts(response)[0] == "Python"  # an exact key match ranks first (similarity 1)
    assert "Alice gave a talk about Rust at a meetup" in texts(response)


def test_recall_counts_accesses_off_the_request_path(agent):
    (memory_id,) = remember(agent, "alice", "Alice runs a half marathon every spring")
    for _ in range(3):
        recall(agent, "alice", "half marathon", top_k=1)

    def counted() -> pb.Memory | None:
        memory = next(m for m in agent.list_all("alice") if m.id == memory_id)
        return memory if memory.access_count == 3 else None

    memory = wait_until(counted, timeout=10, interval=0.2, what="the three recalls are counted")
    assert memory.HasField("last_access_at")


def test_purge_deletes_the_vectors_and_verifies_the_index(agent):
    ids = remember(agent, "alice", "Alice's passport number ends in 42", "Alice lives near the river")

    receipt = agent.erase("alice", all_of_subject=True).receipt

    assert receipt.verified
    assert receipt.counts.memories == 2 and receipt.counts.vectors == 2
    assert texts(recall(agent, "alice", "passport number", top_k=5)) == []
    assert ids


DIALOGUE = [("D1:1", "Alice: Bob, what dish should I cook for the party on Saturday?"),
            ("D1:2", "Bob: Lasagne, with my grandmother's recipe."),
            ("D1:3", "Alice: Perfect, I will bring a green salad as well."),
            ("D2:1", "Alice: I finished the marathon in Berlin last spring."),
            ("D2:2", "Bob: The train to Munich was late again this morning.")]
PARTY = "Which dish should Alice cook for the party?"


def write_dialogue(agent: Agent, subject: str = "alice", *, turn_ids: bool = True) -> dict[str, str]:
    response = agent.write(subject, *(draft("event", text, source_turn_id=turn if turn_ids else "")
                                      for turn, text in DIALOGUE), consistency=WAIT)
    assert response.indexed
    return {turn: r.memory_id for (turn, _), r in zip(DIALOGUE, response.results, strict=True)}


def test_the_turns_next_to_the_best_matching_turn_come_with_it(agent):
    ids = write_dialogue(agent)

    found = recall(agent, "alice", PARTY, top_k=3).memories
    alone = recall(agent, "alice", PARTY, top_k=3, exclude_neighbours=True).memories

    best = found[0]
    assert best.memory.id == ids["D1:1"] and best.neighbour_of == ""
    # The answer shares no word with the question; it comes as the matching turn's neighbour,
    # with a share of that turn's similarity and relevance, and its own raw signals.
    lifted = {m.memory.id: m for m in found if m.neighbour_of}
    assert ids["D1:2"] in lifted and set(lifted) <= {ids["D1:2"], ids["D1:3"]}
    answer = lifted[ids["D1:2"]]
    assert answer.neighbour_of == ids["D1:1"]
    assert answer.similarity == pytest.approx(0.8 * best.similarity, abs=1e-4)
    assert answer.relevance >= 0.8 * best.relevance - 1e-4 and answer.HasField("cosine")
    assert [m.memory.id for m in found][:2] == [ids["D1:1"], ids["D1:2"]]
    # Asked without neighbours, nothing is anyone's neighbour and the answer ranks lower.
    assert all(m.neighbour_of == "" for m in alone)
    assert [m.memory.id for m in alone][:2] != [ids["D1:1"], ids["D1:2"]]


def test_events_without_turn_ids_are_not_turns(agent):
    write_dialogue(agent, turn_ids=False)

    found = recall(agent, "alice", PARTY, top_k=3).memories

    assert found and all(m.neighbour_of == "" for m in found)


def test_a_view_that_hides_provenance_gets_no_neighbours(connect):
    writer = connect()
    ids = write_dialogue(writer)
    fields = [f for f in ALL_FIELDS if f != "provenance"]
    reader = connect("reader", view=full_view("reader", visible_fields=fields))

    found = recall(reader, "alice", PARTY, top_k=3).memories
    same = recall(writer, "alice", PARTY, top_k=3, exclude_neighbours=True).memories

    assert found and all(m.neighbour_of == "" for m in found)
    assert [m.memory.id for m in found] == [m.memory.id for m in same] and found[0].memory.id == ids["D1:1"]


# Two people's memories, each tagged with whose it is (as extraction writes them: the text
# does not repeat the name). The question names Ana; Bo's memories mean as much to it.
SPEAKERS = [("Took up pottery classes last month.", "entity:ana"),
            ("Took up rock climbing last month.", "entity:bo"),
            ("Restores old motorbikes at weekends.", "entity:bo"),
            ("Went camping by the lake with the kids.", "entity:ana"),
            ("The train to Munich was late again.", "entity:bo")]
ANA = {"Took up pottery classes last month.", "Went camping by the lake with the kids."}
HOBBIES = "What hobbies does Ana have?"


def write_speakers(agent: Agent, subject: str, *, tagged: bool = True) -> dict[str, str]:
    response = agent.write(subject, *(draft("event", text, tags=[tag] if tagged else [])
                                      for text, tag in SPEAKERS), consistency=WAIT)
    assert response.indexed
    return {r.memory_id: text for (text, _), r in zip(SPEAKERS, response.results, strict=True)}


def test_a_query_that_names_an_entity_lifts_the_memories_tagged_with_it(agent):
    write_speakers(agent, "alice")
    write_speakers(agent, "plain", tagged=False)

    named = recall(agent, "alice", HOBBIES, top_k=5, min_relevance=0.0).memories
    plain = recall(agent, "plain", HOBBIES, top_k=5, min_relevance=0.0).memories

    # An Ana memory comes first, where an untagged world puts one of Bo's first; each of Ana's
    # memories ranks higher than without the tags, and says which tag the query named and
    # what that added to its similarity.
    assert named[0].memory.text in ANA and plain[0].memory.text not in ANA
    rank = {m.memory.text: n for n, m in enumerate(named)}
    assert all(rank[m.memory.text] < n for n, m in enumerate(plain) if m.memory.text in ANA and n > 0)
    for m in named:
        assert (m.named_entity, m.entity_lift) == (("entity:ana", pytest.approx(0.3)) if m.memory.text in ANA
                                                   else ("", 0))
        expected = 0.65 * (m.similarity + m.entity_lift) + 0.25 * m.recency + 0.10 * m.importance
        assert m.score == pytest.approx(expected, abs=1e-4) and 0 <= m.similarity <= 1
    assert all(m.named_entity == "" for m in plain)


def test_the_dense_channel_is_asked_the_query_without_the_names_it_matched(agent):
    write_speakers(agent, "alice")
    write_speakers(agent, "plain", tagged=False)

    named = recall(agent, "alice", HOBBIES, top_k=5, min_relevance=0.0).memories
    # The untagged copy, asked the question without "Ana" (which none of its texts contains).
    unnamed = recall(agent, "plain", "What hobbies does have?", top_k=5, min_relevance=0.0).memories
    as_asked = recall(agent, "plain", HOBBIES, top_k=5, min_relevance=0.0).memories

    def by_text(found, field):
        return {m.memory.text: getattr(m, field) for m in found}

    assert by_text(named, "cosine") == pytest.approx(by_text(unnamed, "cosine"), abs=1e-5)
    assert by_text(named, "similarity") == pytest.approx(by_text(unnamed, "similarity"), abs=1e-5)
    assert by_text(named, "cosine") != pytest.approx(by_text(as_asked, "cosine"), abs=1e-3)


def test_a_view_that_hides_tags_is_ranked_as_if_there_were_none(connect):
    writer = connect()
    write_speakers(writer, "alice")
    write_speakers(writer, "plain", tagged=False)
    fields = [f for f in ALL_FIELDS if f != "tags"]
    reader = connect("reader", view=full_view("reader", visible_fields=fields))

    hidden = recall(reader, "alice", HOBBIES, top_k=5, min_relevance=0.0).memories
    plain = recall(writer, "plain", HOBBIES, top_k=5, min_relevance=0.0).memories

    # The same order, and the same score parts up to float32 noise: the two copies of a text are
    # embedded in separate batches, and their cosines have been seen ~6e-8 apart (a score 5e-7
    # apart), enough to flip a score rounded to five digits.
    assert [m.memory.text for m in hidden] == [m.memory.text for m in plain]
    for h, p in zip(hidden, plain, strict=True):
        parts = ("score", "cosine", "similarity", "recency", "importance", "keyword_relevance")
        assert [getattr(h, f) for f in parts] == pytest.approx([getattr(p, f) for f in parts], abs=1e-5)
        assert (h.keyword_rank, h.dense_rank) == (p.keyword_rank, p.dense_rank)
    assert all(m.named_entity == "" and m.entity_lift == 0 for m in hidden)
