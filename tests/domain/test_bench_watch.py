"""The watch benchmark's pure parts: who should see which write, how the streams are spread, and
the tally of arrivals (the run itself: `memoryd bench watch`, bench/RESULTS.md)."""

from __future__ import annotations

from collections import Counter

import pytest

from memoryd.bench.watch import READERS, Tally, plan_streams, planned_write, subjects, warmup_write
from memoryd.v1 import memory_pb2 as pb

NAMES = subjects(4)


def test_each_reader_sees_its_share_of_a_subjects_writes():
    writes = [planned_write(n, NAMES) for n in range(6)]
    assert {w.subject for w in writes} == {NAMES[0]}  # six in a row: one subject, every combination
    seen = {r.agent: sum(r.reads(w.category, w.key) for w in writes) for r in READERS}
    assert seen == {"bench-planner": 6, "bench-public": 3, "bench-facts": 2, "bench-narrow": 1}
    assert planned_write(6, NAMES).subject == NAMES[1]


def test_the_readers_views_state_what_the_plan_assumes():
    narrow = next(r for r in READERS if r.agent == "bench-narrow").view()
    assert [(rule.category, list(rule.key_patterns)) for rule in narrow.read_rules] == [(pb.CATEGORY_FACT, ["public.*"])]
    assert not narrow.write_rules  # watchers only read
    assert "key" in narrow.visible_fields  # arrivals are told apart by their key


def test_a_hundred_streams_spread_evenly_over_readers_and_subjects():
    streams = plan_streams(100, NAMES)
    by_subject = Counter(s.subject for s in streams)
    assert by_subject == {"": 20, **{name: 20 for name in NAMES}}
    assert Counter(s.reader.agent for s in streams) == {r.agent: 25 for r in READERS}
    assert Counter(s.reader.agent for s in streams if not s.subject) == {r.agent: 5 for r in READERS}


def test_a_write_is_expected_at_every_stream_that_watches_its_subject_and_reads_it():
    tally = Tally(plan_streams(100, NAMES))
    for n in range(6):
        tally.sent(planned_write(n, NAMES), at=float(n))
    # 40 streams watch subject 0 (20 on it, 20 on all subjects), 10 per reader: 10 × (6 + 3 + 2 + 1).
    assert tally.expected() == 120
    assert tally.hidden() == 40 * 6 - 120


def test_the_tally_times_first_arrivals_and_counts_duplicates_leaks_and_strangers():
    streams = plan_streams(8, NAMES)
    planner, narrow = streams[0], streams[3]  # streams 0-3: the four readers on subject 0
    tally = Tally(streams)
    visible, hidden = planned_write(0, NAMES), planned_write(1, NAMES)  # a public fact; a private preference
    tally.sent(visible, at=10.0)
    tally.sent(hidden, at=10.5)
    assert tally.expected() == 4 + 1  # the public fact at all four, the private preference at the planner
    tally.arrived(planner, visible.key, "created", at=10.25)
    tally.arrived(planner, visible.key, "created", at=10.30)
    tally.arrived(narrow, hidden.key, "created", at=11.0)
    tally.arrived(narrow, "someone-else", "created", at=11.0)
    assert tally.latencies() == [0.25]
    assert (tally.delivered(), tally.missing(), tally.duplicates, tally.leaks, tally.foreign) == (1, 4, 1, 1, 1)
    assert tally.kinds == {"created": 4}


def test_warm_up_and_failed_writes_are_not_expected():
    streams = plan_streams(8, NAMES)
    tally = Tally(streams)
    warm, failed = warmup_write(0, NAMES[0]), planned_write(0, NAMES)
    tally.sent(warm, at=0.0)
    tally.sent(failed, at=0.0)
    tally.write_failed(failed)
    tally.write_failed(failed)  # told twice: still taken out once
    tally.arrived(streams[0], warm.key, "created", at=1.0)
    tally.arrived(streams[0], failed.key, "created", at=1.0)
    assert (tally.expected(), tally.delivered(), tally.missing()) == (0, 0, 0)
    assert tally.warmed == {0}  # the warm-up change shows the stream is open
    tally.arrived(streams[0], warm.key, "created", at=2.0)
    assert tally.duplicates == 1


@pytest.mark.parametrize("value", ["POLL=1", "MEMORYD_X", "=1"], ids=["not-memoryd", "no-value", "no-name"])
def test_server_settings_must_be_memoryd_name_value(value: str):
    import argparse

    from memoryd.bench.watch._cli_watch import _setting

    with pytest.raises(argparse.ArgumentTypeError):
        _setting(value)
