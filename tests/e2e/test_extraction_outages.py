"""Extraction when the model misbehaves for a while: down, overloaded, slow, or looping until
``max_tokens``. Nothing the user said is lost to it, and the model is not hammered."""

from __future__ import annotations

import json
import time

import grpc

from memoryd.v1 import memory_service_pb2 as svc

from ..support import fails, free_port, unique, wait_until
from ..support_fake_openai import Cut, Slow
from .test_metrics import scrape, value
from .test_extraction import dropped, extract, extraction_server, finished, item, job, turn

LYON = {"items": [item("Alice lives in Lyon", "fact", "home_city")]}
OUTAGE = 12.0  # seconds the model is out: three times what the old give-up took
# Small waits, so a test sees many of them: backoff at most 1 s, the breaker open 2 s at most,
# after 3 outage answers in a row.
QUICK = {"MEMORYD_EXTRACTION_RETRY_MAX_BACKOFF_SECONDS": "1", "MEMORYD_EXTRACTION_BREAKER_MAX_OPEN_SECONDS": "2",
         "MEMORYD_EXTRACTION_BREAKER_FAILURES": "3", "MEMORYD_EXTRACTION_CONCURRENCY": "1"}


def waiting(agent, subject, job_id) -> svc.ExtractionJob:
    return wait_until(lambda: (j := job(agent, subject, job_id)).state == svc.EXTRACTION_JOB_STATE_WAITING and j,
                      interval=0.05, what="the job waits for its model")


def test_a_model_refusing_connections_for_a_while_delays_the_job_and_loses_nothing(
        postgres, key_file, tmp_path_factory):
    with extraction_server(postgres, key_file, tmp_path_factory, **QUICK) as rig:
        agent = rig.agent()
        subject, erased = unique("subject"), unique("subject")
        rig.fake.script_chat(LYON)
        rig.fake.down()
        try:
            job_id = extract(agent, subject, turn("t1", "I live in Lyon"))
            dropped_id = extract(agent, erased, turn("t1", "I live in Paris"))
            seen = waiting(agent, subject, job_id)
            # The user sees that it waits, why (memoryd's words), and when it is tried next.
            assert seen.error == "the extraction model could not be reached"
            assert seen.next_attempt_at.seconds and seen.waiting_since.seconds
            assert not seen.finished_at.seconds
            # The other job's subject is erased while it waits: the job and its turns go.
            waiting(agent, erased, dropped_id)
            assert agent.erase(erased, all_of_subject=True).receipt.counts.jobs == 1
            assert fails(agent.call, "GetExtractionJob", svc.GetExtractionJobRequest(
                subject=erased, job_id=dropped_id)).code == grpc.StatusCode.NOT_FOUND
            assert rig.sql("SELECT count(*) FROM extraction_jobs WHERE subject = %s", erased) == [(0,)]
            time.sleep(OUTAGE)
            # All along, the waiting job's turns stay, sealed.
            [(sealed, state)] = rig.sql("SELECT turns_ct, state FROM extraction_jobs WHERE id = %s", job_id)
            assert sealed is not None and b"Lyon" not in bytes(sealed) and state == "queued"
            assert job(agent, subject, job_id).state == svc.EXTRACTION_JOB_STATE_WAITING
        finally:
            rig.fake.up()
        done, _ = finished(agent, subject, job_id)
        assert done.state == svc.EXTRACTION_JOB_STATE_SUCCEEDED and done.error == ""
        assert not done.next_attempt_at.seconds and not done.waiting_since.seconds
        assert [m.key for m in agent.list_all(subject)] == ["home_city"]
        assert rig.sql("SELECT turns_ct FROM extraction_jobs WHERE id = %s", job_id) == [(None,)]


def test_an_overloaded_model_gets_a_trickle_of_requests_while_jobs_wait_then_all_succeed(
        postgres, key_file, tmp_path_factory):
    with extraction_server(postgres, key_file, tmp_path_factory, **QUICK) as rig:
        agent = rig.agent()
        subjects = [unique("subject") for _ in range(3)]
        rig.fake.overloaded(503)
        start = time.monotonic()
        jobs = [(s, extract(agent, s, turn("t1", "I live in Lyon"))) for s in subjects]
        seen = waiting(agent, *jobs[0])
        assert seen.error == "the extraction model was unavailable: HTTP 503 (server error)"
        time.sleep(OUTAGE)
        sent, elapsed = len(rig.fake.chat_requests), time.monotonic() - start
        rig.fake.script_chat(*[LYON for _ in subjects])
        rig.fake.overloaded(None)
        for subject, job_id in jobs:
            done, _ = finished(agent, subject, job_id)
            assert done.state == svc.EXTRACTION_JOB_STATE_SUCCEEDED
            assert [m.key for m in agent.list_all(subject)] == ["home_city"]
        # The breaker: 3 outage answers, then one trial per cool-down (2 s at least) — not
        # one request per job per backoff (3 jobs every second or less: over 30).
        assert sent <= 3 + 1 + elapsed / 2, f"{sent} requests in {elapsed:.1f}s"
        assert "no job is sent to it for a while" in rig.log.read_text()


def test_a_model_out_past_the_horizon_fails_the_job_and_its_turns_go(postgres, key_file, tmp_path_factory):
    with extraction_server(postgres, key_file, tmp_path_factory, **QUICK,
                           MEMORYD_EXTRACTION_RETRY_HORIZON_SECONDS="3") as rig:
        agent = rig.agent()
        subject = unique("subject")
        rig.fake.overloaded(503)
        done, seen = finished(agent, subject, extract(agent, subject, turn("t1", "I live in Lyon")))
        assert svc.EXTRACTION_JOB_STATE_WAITING in seen
        assert done.state == svc.EXTRACTION_JOB_STATE_FAILED
        assert done.error == ("the extraction model was unavailable: HTTP 503 (server error) "
                              "(gave up after waiting 3s for it)")
        assert done.finished_at.seconds - done.created_at.seconds >= 3
        assert agent.list_all(subject) == []
        assert rig.sql("SELECT turns_ct FROM extraction_jobs WHERE id = %s", done.id) == [(None,)]


def test_a_request_the_job_stopped_waiting_for_keeps_its_slot_until_the_model_is_done(
        postgres, key_file, tmp_path_factory):
    with extraction_server(postgres, key_file, tmp_path_factory, MEMORYD_EXTRACTION_CONCURRENCY="1",
                           MEMORYD_EXTRACTION_TIMEOUT_SECONDS="1.0") as rig:
        agent = rig.agent()
        subjects = [unique("subject") for _ in range(3)]
        # The model takes 3.5 s over the first request, as a CPU model on a long answer: the
        # job stops waiting after 1 s, but the model works on; nothing more is sent meanwhile.
        rig.fake.script_chat(Slow(3.5, LYON), LYON, LYON, LYON)
        jobs = [(subjects[0], extract(agent, subjects[0], turn("t1", "I live in Lyon")))]
        wait_until(lambda: rig.fake.chat_requests, what="the first job's request reaches the model")
        jobs += [(s, extract(agent, s, turn("t1", "I live in Lyon"))) for s in subjects[1:]]
        for subject, job_id in jobs:
            done, _ = finished(agent, subject, job_id)
            assert done.state == svc.EXTRACTION_JOB_STATE_SUCCEEDED
        assert rig.fake.chat_peak == 1 and len(rig.fake.chat_requests) == 4


def test_an_answer_cut_off_by_a_loop_keeps_its_complete_items_and_counts_the_cut(
        postgres, key_file, tmp_path_factory):
    with extraction_server(postgres, key_file, tmp_path_factory) as rig:
        agent = rig.agent()
        subject = unique("subject")
        kept = [item("Alice lives in Lyon", "fact", "home_city"), item("Alice adopted a cat named Mochi")]
        loop = json.dumps(item("Alice adopted a cat named Mochi in Lyon"))
        content = json.dumps({"items": kept})[:-2] + ", " + loop[:loop.index("in Lyon")]  # cut inside a text
        rig.fake.script_chat(Cut(content))
        done, _ = finished(agent, subject, extract(agent, subject, turn("t1", "I live in Lyon and adopted Mochi, a cat")))
        assert done.state == svc.EXTRACTION_JOB_STATE_SUCCEEDED and done.attempts == 1
        assert dropped(done) == {"cut_off": 1}
        assert sorted(m.text for m in agent.list_all(subject)) == ["Alice adopted a cat named Mochi",
                                                                   "Alice lives in Lyon"]


def test_the_metrics_show_the_breaker_open_and_jobs_waiting_then_closed_and_none_after_the_model_returns(
        postgres, key_file, tmp_path_factory):
    port = free_port()
    # A cool-down of 4 s: long enough to see a job queued behind it, short enough to end soon.
    with extraction_server(postgres, key_file, tmp_path_factory, **{
            **QUICK, "MEMORYD_EXTRACTION_BREAKER_MAX_OPEN_SECONDS": "4"},
            MEMORYD_METRICS_ADDR=f"127.0.0.1:{port}", MEMORYD_METRICS_REFRESH_SECONDS="1") as rig:
        url = f"http://127.0.0.1:{port}/metrics"
        model_at = rig.env["MEMORYD_EXTRACTION_URL"].split("//")[1].split("/")[0]  # host:port

        def breaker(state: str) -> float | None:
            return value(scrape(url), "memoryd_extraction_breaker_state", memoryd_model_endpoint=model_at,
                         state=state)

        agent = rig.agent()
        subject, behind = unique("subject"), unique("subject")
        rig.fake.script_chat(LYON, LYON)
        rig.fake.down()
        try:
            job_id = extract(agent, subject, turn("t1", "I live in Lyon"))
            wait_until(lambda: breaker("open") == 1, interval=0.2, timeout=60, what="the breaker shows open")
            samples = scrape(url)
            assert value(samples, "memoryd_extraction_jobs_waiting") >= 1
            assert breaker("closed") == 0
            # Nothing of the endpoint but its host and port, nothing of the job or its subject.
            text = "\n".join(f"{n} {labels}" for n, labels, _ in samples if "extraction" in n)
            assert "/v1" not in text and "sk-extract" not in text and subject not in text and "Lyon" not in text
            # A job queued behind the open breaker says it waits for the model.
            queued = waiting(agent, behind, extract(agent, behind, turn("t1", "I live in Lyon")))
            # The retries are counted while the jobs wait, before their tenant has any memory.
            wait_until(lambda: (value(scrape(url), "memoryd_extraction_outage_retries_total") or 0) >= 1,
                       interval=0.2, timeout=30, what="the outage retries are counted during the outage")
        finally:
            rig.fake.up()
        for s_, id_ in ((subject, job_id), (behind, queued.id)):
            done, _ = finished(agent, s_, id_)
            assert done.state == svc.EXTRACTION_JOB_STATE_SUCCEEDED
        wait_until(lambda: breaker("closed") == 1 and breaker("open") == 0
                   and value(scrape(url), "memoryd_extraction_jobs_waiting") == 0,
                   interval=0.2, timeout=30, what="the breaker shows closed and no job waiting")
        wait_until(lambda: (value(scrape(url), "memoryd_extraction_outage_retries_total") or 0) >= 3,
                   interval=0.2, timeout=30, what="the outage retries are counted")
