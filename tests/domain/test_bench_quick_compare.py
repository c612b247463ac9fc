"""``memoryd bench quick`` beside the previous run: the history folder, the previous column and
its marks, the footer that names both runs, and which Mem0 harness a run uses. Pure: runs are
hand-made and written as bench quick writes them (``json_quick``); nothing is measured."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from memoryd.bench.quick._cli_quick import mem0_harness
from memoryd.bench._locomo import BenchError
from memoryd.bench.quick._mem0 import mem0_measured
from memoryd.bench.quick._quick import QuickOptions, QuickResult
from memoryd.bench.quick._targets import Measured
from memoryd.bench.quick._quick_report import (
    change,
    history_file,
    json_quick,
    load_run,
    newest_run,
    text_quick,
)

from .test_bench_quick import MACHINE, VERSIONS, _parser

BUSY = {**MACHINE, "loadavg": [2.5, 2.0, 1.8]}


def _run(measured: dict[str, float | None], **options: object) -> QuickResult:
    result = QuickResult(QuickOptions(dataset=Path("locomo10.json"), **options))  # type: ignore[arg-type]
    result.measured = {key: Measured(value, "hand-made") for key, value in measured.items()}
    result.seconds = 200.0
    result.finished_at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    return result


def _previous() -> dict[str, object]:
    result = _run({"recall_p50": 30.0, "recall_p99": 40.0, "index_rate": 60.0, "batch_rate": 1_500.0,
                   "ack_p50": 8.0, "recall_at_10": 0.70, "mem0_ratio": None}, madial_dialogues=10)
    document = json_quick(result, BUSY, BUSY, {**VERSIONS, "git": "0123prev4567"})
    return json.loads(json.dumps(document))  # as read back from the history folder


def _row(text: str, what: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(what))


def test_each_row_shows_the_previous_runs_figure_and_marks_one_worse_beyond_its_noise_margin():
    now = _run({"recall_p50": 45.0, "recall_p99": 44.0, "index_rate": 40.0, "batch_rate": 1_200.0,
                "ack_p50": 4.0, "recall_at_10": 0.68, "mem0_ratio": 0.9, "madial_p50": 70.0})
    text = text_quick(now, MACHINE, MACHINE, VERSIONS, _previous(), Path("runs/20260101T000000Z-0123prev4567.json"))
    row = _row(text, "Recall p50, LoCoMo")
    assert "45.0 ms" in row and "30.0 ms" in row and "+50% !" in row  # slower by more than 15 %
    row = _row(text, "Recall p99, same calls")
    assert "40.0 ms" in row and "+10%" in row and "!" not in row  # within the p99's 25 %
    row = _row(text, "indexing, default embedder")
    assert "60.0 items/s" in row and "-33% !" in row  # an at-least row gets worse going down
    row = _row(text, "Write acks, batches of 50")
    assert "-20%" in row and "!" not in row  # a short burst's rate: within 25 %
    row = _row(text, "Write ack, one item")
    assert "-50%" in row and "!" not in row  # faster is never marked
    row = _row(text, "recall@10 of those LoCoMo questions")
    assert "0.700" in row and "-3% !" in row  # quality: a 2 % margin
    row = _row(text, "Mem0 ÷ memoryd")
    assert "0.90 ×" in row and row.count("—") >= 2  # not measured before: no figure, no change
    row = _row(text, "Recall p50, long queries")
    assert "70.0 ms" in row and "!" not in row
    worse = _row(text, "WORSE than the previous run beyond the noise margin: ")
    assert "Recall p50, LoCoMo, gRPC, one call at a time (+50%)" in worse
    assert "indexing, default embedder (written → searchable) (-33%)" in worse
    assert "recall@10 of those LoCoMo questions (categories 1-4) (-3%)" in worse
    assert "Recall p99" not in worse and "Write ack" not in worse
    assert "NOTE: a 1-minute load average above the 2 cores during one run or both" in text  # the previous: 2.5


def test_runs_at_a_quiet_time_get_no_note_about_the_machines_load():
    previous = _previous()
    previous["machine"] = {"before": MACHINE, "after": MACHINE}
    text = text_quick(_run({"recall_p50": 45.0}), MACHINE, MACHINE, VERSIONS, previous)
    assert "+50% !" in _row(text, "Recall p50, LoCoMo") and "NOTE: a 1-minute load average" not in text
    text = text_quick(_run({"recall_p50": 45.0}), MACHINE, BUSY, VERSIONS, previous)  # this run ended busy
    assert "NOTE: a 1-minute load average above the 2 cores" in text


def test_the_footer_names_both_runs_commits_times_and_load_and_the_options_that_differ():
    now = _run({"recall_p50": 29.0})
    text = text_quick(now, MACHINE, MACHINE, VERSIONS, _previous(), Path("runs/old.json"))
    assert ("this run: git abc123def456, finished 2026-01-02T03:04:05+00:00, load average [0.5, 0.4, 0.3] → "
            "[0.5, 0.4, 0.3]") in text
    assert ("previous: git 0123prev4567, finished 2026-01-02T03:04:05+00:00, load average [2.5, 2.0, 1.8] → "
            "[2.5, 2.0, 1.8]; runs/old.json") in text
    assert "options differ from the previous run (rows not comparable one for one): madial_dialogues 10 → 40" in text
    assert "no row worse than the previous run beyond its noise margin" in text


def test_a_run_compared_with_an_older_format_shows_no_figure_for_rows_it_lacked():
    previous = _previous()
    previous["rows"] = [row for row in previous["rows"] if row["key"] != "recall_p50"]  # type: ignore[attr-defined]
    text = text_quick(_run({"recall_p50": 45.0}), MACHINE, MACHINE, VERSIONS, previous)
    row = _row(text, "Recall p50, LoCoMo")
    assert "45.0 ms" in row and "!" not in row and "%" not in row


def test_a_change_needs_two_figures_and_a_previous_figure_other_than_zero():
    row = {"key": "x", "measured": 5.0, "at_most": True, "noise": 0.15}
    assert change(row, {"measured": 0.0}).percent is None
    assert change(row, None).previous is None and not change(row, None).worse
    assert change({**row, "measured": None}, {"measured": 4.0}).previous == 4.0
    assert change(row, {"measured": 4.0}).worse and not change(row, {"measured": 4.5}).worse


def test_the_mixed_load_curve_is_printed_with_the_previous_runs_beside_it():
    now = _run({})
    now.details["load_curve"] = [{"workers": 1, "calls_per_second": 12.5, "recall_p99_ms": 51.0},
                                 {"workers": 8, "calls_per_second": 30.0, "recall_p99_ms": 410.0}]
    previous = _previous()
    previous["details"] = {"load_curve": [{"workers": 8, "calls_per_second": 33.0, "recall_p99_ms": 380.0}]}
    text = text_quick(now, MACHINE, MACHINE, VERSIONS, previous)
    assert "closed-loop workers: calls/s, Recall p99): 1: 12.5/s, p99 51 ms · 8: 30.0/s, p99 410 ms" in text
    assert "previous run: 8: 33.0/s, p99 380 ms" in text


def test_runs_are_kept_under_names_that_sort_in_time_and_the_newest_is_found(tmp_path: Path):
    eastern = timezone(timedelta(hours=2))
    assert history_file(tmp_path, datetime(2026, 1, 2, 5, 4, 5, tzinfo=eastern), "abc-dirty") == \
        tmp_path / "20260102T030405Z-abc-dirty.json"
    assert history_file(tmp_path, datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), None).name == "20260102T030405Z-no-git.json"
    assert newest_run(tmp_path / "none yet") is None
    for name in ("20260102T030405Z-b.json", "20251231T235959Z-c.json", "20260102T030406Z-a.svg", "notes.json"):
        (tmp_path / name).write_text("{}")
    assert newest_run(tmp_path) == tmp_path / "20260102T030405Z-b.json"


def test_a_previous_run_must_be_a_bench_quick_json(tmp_path: Path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_previous()))
    assert load_run(good)["versions"]["git"] == "0123prev4567"
    (tmp_path / "locomo.json").write_text(json.dumps({"benchmark": "locomo-retrieval"}))
    (tmp_path / "broken.json").write_text("{")
    for name in ("locomo.json", "broken.json", "missing.json"):
        with pytest.raises(BenchError):
            load_run(tmp_path / name)


def test_an_unreadable_previous_run_stops_the_command_before_anything_runs(tmp_path: Path):
    dataset = tmp_path / "locomo10.json"
    dataset.write_text("[]")
    (tmp_path / "old.json").write_text(json.dumps({"benchmark": "scale"}))
    args = _parser().parse_args(["bench", "quick", "--dataset", str(dataset), "--previous", str(tmp_path / "old.json"),
                                 "--history", str(tmp_path / "runs"), "--no-mem0"])
    errors = io.StringIO()
    with redirect_stderr(errors):
        assert args.run(args) == 1
    assert "is not the JSON of a bench quick run" in errors.getvalue()
    assert not (tmp_path / "runs").exists()


def test_mem0_runs_where_its_virtualenv_is_and_says_how_to_get_it_where_not(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("MEM0_VENV", raising=False)
    script = tmp_path / "bench" / "mem0" / "run_locomo.py"
    script.parent.mkdir(parents=True)
    script.write_text("")
    harness, why = mem0_harness(None, tmp_path)
    assert harness is None and "make bench-mem0 once" in why and str(tmp_path / ".build" / "mem0-venv") in why
    with pytest.raises(BenchError, match="--mem0: no Mem0 virtualenv"):
        mem0_harness(True, tmp_path)
    python = tmp_path / ".build" / "mem0-venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    harness, _ = mem0_harness(None, tmp_path)
    assert harness is not None and (harness.python, harness.script) == (python, script)
    assert mem0_harness(False, tmp_path) == (None, "--no-mem0")
    elsewhere = tmp_path / "other-venv"
    (elsewhere / "bin").mkdir(parents=True)
    (elsewhere / "bin" / "python").write_text("")
    monkeypatch.setenv("MEM0_VENV", str(elsewhere))  # as bench/mem0/setup.sh reads it
    harness, _ = mem0_harness(True, tmp_path)
    assert harness is not None and harness.python == elsewhere / "bin" / "python"


def test_the_mem0_row_is_mem0s_search_p50_over_memoryds_recall_p50():
    report = {"conversations": ["conv-26"], "latency_ms": {"p50": 24.6, "p99": 31.0},
              "overall": {"recall": {"10": 0.61}}, "versions": {"mem0ai": "2.2.1"},
              "questions": [{"latency_ms": 24.6}] * 152}
    row = mem0_measured(report, 20.5)
    assert row.value == pytest.approx(1.2)
    assert "Mem0 OSS 2.2.1" in row.how and "search p50 24.6 ms, p99 31.0 ms over 152 questions" in row.how
    assert "recall@10 0.610" in row.how and "memoryd's p50 20.5 ms" in row.how
    assert mem0_measured(report, None).value is None and mem0_measured({}, 20.0).value is None
