"""`memoryd bench madial`: reading MADial-Bench (its line styles), the query and context it sends,
the arithmetic (recall@k as the authors compute it), the report and JSON, the command line. A run
against a server: tests/e2e/test_bench_madial_run.py."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest

from memoryd.bench import add_bench_commands
from memoryd.bench.madial._bilingual import Returned
from memoryd.bench.madial._madial import (
    MAX_ITEMS,
    MAX_QUERY_BYTES,
    Asked,
    MadialOptions,
    MadialResult,
    context_turns,
    fit_query,
    ignores_context,
    load_set,
)
from memoryd.bench.madial._madial_report import json_result, report
from memoryd.bench.madial._madial_data import (
    ASSISTANT,
    Dialogue,
    Said,
    find_madial,
    load_memories,
    parse_lines,
)
from memoryd.client import MemorydError
from memoryd.server import Limits
from memoryd.server.validation import validate_write
from memoryd.v1 import memory_service_pb2 as svc


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memoryd")
    add_bench_commands(parser.add_subparsers(dest="command", required=True))
    return parser


def _real() -> Path | None:
    """``shared/datasets/madial-bench`` beside the repository (never copied into it)."""
    for folder in Path(__file__).resolve().parents:
        if (folder / "shared" / "datasets" / "madial-bench" / "data").is_dir():
            return folder / "shared" / "datasets" / "madial-bench"
    return None


def _jsonl(path: Path, lines: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")


def synthetic_madial(folder: Path) -> Path:
    """A MADial-Bench folder of the real files' shapes: two users, three dialogues per language;
    dialogue 2's gold ids differ between the languages (so it is not asked across them) and
    memory 161 has no English version."""
    _jsonl(folder / "data" / "ch" / "MADial-Bench-zh-memory.json", [
        {"1": {"time": "2023-12-25", "scene": "活动类", "emotion": "开心", "event": "Bart在圣诞节晚会上跳舞，感觉非常开心。",
               "user-id": 1, "id": "1"}},
        {"2": {"time": "2023-05-15", "scene": "喜好类", "emotion": "开心", "event": "Bart尝试了芒果口味的冰淇淋。",
               "user-id": 1, "id": "2"}},
        {"3": {"time": "2023-04-15", "scene": "活动类", "emotion": "焦虑", "event": "Lisa参加了绘画比赛。",
               "user-id": 2, "id": "3"}},
        {"161": {"time": "2024-01-01", "scene": "其他类", "emotion": "平静", "event": "Lisa养了一只猫。",
                 "user-id": 2, "id": "161"}},
    ])
    _jsonl(folder / "data" / "en" / "MADial-Bench-en-memory.json", [
        {"1": {"time": "2023-12-25", "scene": "Activity", "emotion": "Happy",
               "event": "Bart danced at the Christmas party and felt very happy."}},
        {"2": {"time": "2023-05-15", "scene": "Preferences", "emotion": "Happy",
               "event": "Bart tried mango-flavored ice cream."}},
        {"3": {"time": "2023-04-15", "scene": "Activity", "emotion": "Anxious",
               "event": "Lisa took part in a painting competition."}},
    ])
    zh = [["<BOD>\n", '<Bart>:"元旦晚会我要表演魔术！"\n', '<Assistant>:"真是太棒了！"\n', '<Bart>:"我要穿什么好呢？"\n',
           '<Assistant>:"你记得去年圣诞节晚会上你跳舞的时候吗？"\n', "<EOD>\n"],
          [" <BOD>\n", ' <Bart>:"我想吃冰淇淋。"\n', ' <Assistant>:"什么口味？"\n', ' <Bart>:"芒果的！"\n',
           ' <Assistant>:"上次那家店？"\n', "<EOD>\n"],
          ["<BOD>\n", "<Lisa>:“我又要画画比赛了。”\n", "<Assistant>:“加油！”\n", "<Lisa>:“好紧张。”\n",
           "<Assistant>:“上次你也很紧张。”\n", "<EOD>\n"]]
    en = [["<BOD>\n", '<Bart>: "I will perform a magic trick at the New Year party!"\n',
           '<Assistant>: "That is fantastic!"\n', '<Bart>: "What should I wear?"\n',
           '<Assistant>: "Do you remember dancing at the Christmas party?"\n', "<EOD>\n"],
          ["<BOD>\n", '<Bart>: "I want ice cream."\n', '"Which flavour?"\n', '<Bart>: "Mango!"\n',
           '<Assistant>: "The same shop as last time?"\n', "<EOD>\n"],
          ["<BOD>\n", '<Lisa>: "Another painting competition."\n', "<Good luck!>\n", '<Lisa>: "I am nervous."\n',
           '<Assistant>: "You were nervous last time too."\n', "<EOD>\n"]]
    gold = {"zh": [[1], [2], [3, 161]], "en": [[1], [2], [3]]}
    for language, folder_name, dialogues in (("zh", "ch", zh), ("en", "en", en)):
        _jsonl(folder / "data" / folder_name / f"MADial-Bench-{language}-dialogue.json",
               [{"dialogue": d, "test-turn": [4], "relevant-id": gold[language][i], "user-id": 1 if i < 2 else 2}
                for i, d in enumerate(dialogues)])
    return folder


# --- reading ------------------------------------------------------------------------------------

def test_every_line_style_of_the_data_becomes_a_turn_of_the_right_speaker():
    lines = ["<BOD>\n",
             '<Bart>:"嘿，你知道吗？元旦晚会我要表演魔术！"\n',  # zh: no space, ascii quotes
             "<Assistant>:“真是太棒了！”\n",  # full-width quotes
             ' <Bart>:"我也会有点紧张呢。"\n',  # a leading space
             '<Assistant>:喜欢喜欢，星星在夜空中就像无数小灯泡。"\n',  # no opening quote
             '<Bart>: "Can I do it again?"\n',  # en: a space after the colon
             '"Of course, that dance is really captivating."\n',  # the assistant's label lost
             '<Bart>: "Thanks!"\n',
             "<Pizza is a great choice!>\n",  # lost, and in angle brackets
             "<EOD>\n"]
    assert parse_lines(lines) == [
        Said("Bart", "嘿，你知道吗？元旦晚会我要表演魔术！"), Said("Assistant", "真是太棒了！"), Said("Bart", "我也会有点紧张呢。"),
        Said("Assistant", "喜欢喜欢，星星在夜空中就像无数小灯泡。"), Said("Bart", "Can I do it again?"),
        Said("Assistant", "Of course, that dance is really captivating."), Said("Bart", "Thanks!"),
        Said("Assistant", "Pizza is a great choice!")]


def test_the_query_is_the_lines_before_the_first_test_turn_joined_as_they_are():
    lines = ("<BOD>\n", '<Bart>:"我要表演魔术！"\n', '<Assistant>:"太棒了！"\n', '<Bart>:"穿什么？"\n', '<Assistant>:"记得吗？"\n')
    dialogue = Dialogue(0, 1, lines, 3, (1,))
    assert dialogue.history == '<BOD>\n<Bart>:"我要表演魔术！"\n<Assistant>:"太棒了！"\n'
    assert dialogue.turns() == [Said("Bart", "我要表演魔术！"), Said("Assistant", "太棒了！")]


def test_the_english_archive_takes_its_users_from_the_chinese_one(tmp_path: Path):
    folder = synthetic_madial(tmp_path)
    en = load_memories(folder, "en")
    assert {i: m.user for i, m in en.items()} == {1: 1, 2: 1, 3: 2}
    assert en[1].text == "[2023-12-25] Bart danced at the Christmas party and felt very happy."
    data = load_set(folder)
    assert [d.index for d in data.asked("zh")] == [0, 1, 2] and [d.index for d in data.asked("en-zh")] == [0, 1]
    assert [d.index for d in data.asked("zh-en", limit=1)] == [0]
    assert [d.index for d in data.asked("zh", limit=2)] == [0, 1]
    assert [d.index for d in data.asked("zh", limit=2, spread=True)] == [0, 1]
    assert [d.index for d in data.asked("en", limit=5, spread=True)] == [0, 1, 2]  # no more than there are


@pytest.mark.skipif(_real() is None, reason="MADial-Bench is not beside the repository (shared/datasets)")
def test_a_spread_sample_takes_every_kth_dialogue_of_the_mode():
    folder = _real()
    assert folder is not None
    data = load_set(folder)
    assert [d.index for d in data.asked("zh", limit=40, spread=True)] == list(range(0, 160, 4))
    assert [d.index for d in data.asked("zh", limit=40)] == list(range(40))
    assert len(data.asked("en-zh", limit=40, spread=True)) == 40


@pytest.mark.skipif(_real() is None, reason="MADial-Bench is not beside the repository (shared/datasets)")
def test_the_real_data_reads_whole_and_every_dialogue_alternates():
    folder = _real()
    assert folder is not None and find_madial(str(folder)) == folder
    data = load_set(folder)
    assert {language: len(d) for language, d in data.dialogues.items()} == {"zh": 160, "en": 160}
    assert {language: len(m) for language, m in data.memories.items()} == {"zh": 171, "en": 160}
    assert all(data.memories["en"][i].user == data.memories["zh"][i].user for i in data.memories["en"])
    assert len(data.asked("zh-en")) == len(data.asked("en-zh")) == 152
    for language, dialogues in data.dialogues.items():
        for dialogue in dialogues:
            turns = dialogue.turns()
            speakers = ["assistant" if t.speaker == "Assistant" else "user" for t in turns]
            assert speakers == ["user", "assistant"] * (len(turns) // 2) + ["user"] * (len(turns) % 2), dialogue.index
            assert len(turns) == dialogue.test_turn - 1, (language, dialogue.index)
            assert not any(t.text[0] in "\"“<" or t.text[-1] in "\"”>" for t in turns), (language, dialogue.index)
            # No query is cut: the longest is about 1 KB.
            assert len(dialogue.history.encode()) <= MAX_QUERY_BYTES
            # The context's turns are "each as in a Write": the server's Write validator takes them.
            context = context_turns(turns, datetime.now(UTC))
            assert len(validate_write(svc.WriteRequest(subject="s", turns=context), Limits()).turns) == len(turns)


# --- what is sent -------------------------------------------------------------------------------

def test_the_limits_are_the_servers_defaults():
    assert MAX_QUERY_BYTES == Limits().max_query_bytes and MAX_ITEMS == Limits().max_items


def test_a_query_that_fits_is_sent_whole_and_a_longer_one_keeps_its_last_lines():
    text = "<BOD>\n" + "".join(f"<Bart>:\"第{i}句话，说了很多很多。\"\n" for i in range(200))
    assert fit_query("<BOD>\n<Bart>: \"hi\"\n") == ("<BOD>\n<Bart>: \"hi\"\n", False)
    cut, was_cut = fit_query(text)
    assert was_cut and len(cut.encode()) <= MAX_QUERY_BYTES and text.endswith(cut)
    assert cut.startswith("<Bart>:") and len(cut.encode()) > MAX_QUERY_BYTES - 60  # whole lines, as many as fit
    single, was_cut = fit_query("长" * 1000)
    assert was_cut and single == "长" * 666  # the last 2000 bytes, cut at a character


def test_the_context_turns_are_one_minute_apart_and_end_now():
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    turns = context_turns([Said("Bart", "我要表演魔术！"), Said("Assistant", "太棒了！"), Said("Bart", "穿什么？")], now)
    assert [(t.turn_id, t.speaker, t.text) for t in turns] == [
        ("t1", "Bart", "我要表演魔术！"), ("t2", "assistant", "太棒了！"), ("t3", "Bart", "穿什么？")]
    assert [t.time.ToDatetime(UTC) for t in turns] == [now - timedelta(minutes=2), now - timedelta(minutes=1), now]


def test_only_a_server_that_drops_the_context_is_said_not_to_take_it():
    def error(code: grpc.StatusCode, violations: dict[str, str]) -> MemorydError:
        return MemorydError("invalid request", code=code, violations=violations)

    assert ignores_context(error(grpc.StatusCode.INVALID_ARGUMENT, {"query": "a query or at least one key is required"}))
    assert not ignores_context(error(grpc.StatusCode.INVALID_ARGUMENT, {"context[2].time": "is required"}))
    assert not ignores_context(error(grpc.StatusCode.UNAVAILABLE, {}))


# --- arithmetic, report, JSON -------------------------------------------------------------------

def _asked(mode: str, shape: str, relevant: tuple[str, ...], ranking: tuple[tuple[str, ...], ...],
           latency_ms: float = 10.0, cut: bool = False, first: bool = True) -> Asked:
    returned = tuple(Returned("+".join(ids), 0.5, 0.5, 0.5, 0.1) for ids in ranking)
    return Asked(mode, shape, 0, 1, relevant, ranking, returned, latency_ms, 100, cut, first)


def _result(folder: Path, **options: Any) -> MadialResult:
    result = MadialResult(MadialOptions(folder=folder, modes=("zh", "en-zh"), **options))
    result.asked = [
        # gold {1, 2}: one in the top 1, both in the top 3 → R@1 0.5, R@3 1.0
        _asked("zh", "query", ("1", "2"), (("1",), ("9",), ("2",)), 10.0),
        # gold {3}: at rank 4 → R@3 0, R@5 1
        _asked("zh", "query", ("3",), (("7",), ("8",), ("9",), ("3",)), 30.0),
        # an exact repeat merged into one memory stands for both ids; a dialogue asked before
        # (its embedding may be cached) is not timed
        _asked("en-zh", "query", ("5", "6"), (("5", "6"),), 1.0, first=False),
        _asked("en-zh", "query", ("4",), (), 40.0, cut=True),  # an empty answer
    ]
    result.asked[1] = replace(result.asked[1], degraded="vector index unavailable")
    result.longest_query_bytes = 2400
    result.refused = {"context": "INVALID_ARGUMENT: invalid request"}
    result.reference = {"sentences": {"what": "short sentences", "calls": 4, "latency_ms": {"p50": 10.0, "p99": 12.0}}}
    return result


def test_recall_at_k_is_the_share_of_gold_found_averaged_over_the_dialogues(tmp_path: Path):
    zh, en_zh = _result(tmp_path).rows("query")
    assert zh.dialogues == 2 and zh.recall == {1: 0.25, 3: 0.5, 5: 1.0, 10: 1.0}
    assert zh.hit == 1.0 and zh.empty == 0 and zh.p50 == 20.0
    assert en_zh.recall == {1: 0.5, 3: 0.5, 5: 0.5, 10: 0.5} and en_zh.hit == 0.5 and en_zh.empty == 1


def test_latency_counts_each_dialogues_first_call_only(tmp_path: Path):
    result = _result(tmp_path)
    assert result.rows("query")[1].p50 == 40.0  # en-zh: its repeat (1 ms) left out
    assert result.latency("query") == {"p50": 30.0, "p99": 39.8, "calls": 3}


def test_a_smaller_top_k_reports_only_the_cut_offs_it_reaches(tmp_path: Path):
    result = _result(tmp_path, k=3)
    assert result.ks == (1, 3) and result.hit_at == 3
    assert "R@5" not in report(result) and "hit@3" in report(result)


def test_the_report_has_a_table_per_shape_and_says_what_was_not_measured(tmp_path: Path):
    text = report(_result(tmp_path))
    assert "top_k 10, min_relevance server default" in text
    query = text.split("shape query")[1].split("shape context")[0]
    assert "R@1    R@3    R@5   R@10  hit@5 empty" in query
    assert "zh             2  0.250  0.500  1.000  1.000  1.000     0    20.0" in query
    assert "en-zh          2  0.500  0.500  0.500  0.500  0.500     1    40.0" in query
    assert "not measured: this server does not take RecallRequest.context (INVALID_ARGUMENT" in text
    assert "longest 2400 bytes; the server takes 2000: 1 cut to their last lines that fit" in text
    assert "reference (sentences), same server: short sentences: 4 calls, p50 10.0 ms" in text
    assert "Recall p50, shape query ÷ reference p50: sentences 3.00×" in text
    assert "first call of the run only" in text
    assert "shape context ÷" not in text
    assert "WARNING: 1 recalls were degraded: vector index unavailable ×1" in text


def test_the_json_has_every_dialogue_and_no_text_of_the_dataset(tmp_path: Path):
    folder = synthetic_madial(tmp_path)
    document = json_result(_result(folder))
    assert set(document) >= {"dataset", "options", "rows", "refused", "latency_ms", "queries", "reference", "ratios",
                             "dialogues"}
    assert len(document["dataset"]["sha256"]) == 4 and document["options"]["top_k"] == 10
    assert document["rows"]["query"][0]["recall"] == {"1": 0.25, "3": 0.5, "5": 1.0, "10": 1.0}
    assert document["rows"]["context"] == [] and "context" in document["refused"]
    assert document["ratios"] == {"query": {"sentences": 3.0}, "context": {"sentences": None}}
    merged = document["dialogues"][2]
    assert merged["returned"][0]["id"] == "5+6" and merged["recall"]["1"] == 1.0
    dumped = json.dumps(document, ensure_ascii=False)
    assert "Bart" not in dumped and "圣诞节" not in dumped


# --- the command line ---------------------------------------------------------------------------

def test_the_command_line_has_bench_madial_with_its_defaults():
    args = _parser().parse_args(["bench", "madial"])
    assert args.modes == ("zh", "en", "zh-en", "en-zh") and args.shapes == ("query", "context")
    assert args.k == 10 and args.min_relevance is None and args.limit == 0 and args.reference_questions == 0
    assert not args.spread and args.locomo is None
    args = _parser().parse_args(["bench", "madial", "--modes", "zh,en-zh", "--shapes", "context", "--limit", "3",
                                 "--spread", "--min-relevance", "0", "--reference-questions", "5"])
    assert args.modes == ("zh", "en-zh") and args.shapes == ("context",) and args.limit == 3 and args.spread
    assert args.min_relevance == 0.0 and args.reference_questions == 5


@pytest.mark.parametrize("bad", [["--modes", "zh,fr"], ["--shapes", "prompt"], ["--limit", "-1"],
                                 ["--min-relevance", "2"]], ids=["mode", "shape", "limit", "relevance"])
def test_a_bad_option_is_refused_by_the_command_line(bad: list[str], capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        _parser().parse_args(["bench", "madial", *bad])
    assert "error" in capsys.readouterr().err


def test_a_missing_dataset_is_an_error_that_names_the_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    args = _parser().parse_args(["bench", "madial", "--dataset", str(tmp_path / "nowhere")])
    assert args.run(args) == 1
    assert f"not found under {tmp_path / 'nowhere'}" in capsys.readouterr().err


def test_the_small_talk_set_is_read_and_shares_no_sentence_with_the_servers_exemplars():
    from memoryd.bench.madial._madial import load_small_talk
    from memoryd.server.recall._relevance import CHATTER

    talks = load_small_talk()
    assert len(talks) == 24 and {t.language for t in talks} == {"en", "zh"}
    assert all(t.said and t.said[-1].speaker != ASSISTANT for t in talks)  # a user has the last word
    # Held apart from what the server measures small talk with: no sentence of one is in the other.
    assert not {s.text for t in talks for s in t.said} & set(CHATTER)
