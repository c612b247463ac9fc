"""Extraction against the model servers people run, end to end: a real server, and a fake that
takes requests as that server does (``FakeOpenAI(flavour=…)``). Each test starts its own
server, with the settings an operator would set for that endpoint."""

from __future__ import annotations

from memoryd.v1 import memory_service_pb2 as svc

from ..support import unique, wait_until
from ..support_fake_openai import Slow
from .test_extraction import extract, extraction_server, finished, item, turn

LYON = {"items": [item("Alice lives in Lyon", "fact", "home_city")]}
# A user's turn that says what a server's refusal of the structured-output request would.
FORMAT_WORDS = "My notes app says: response_format json_schema not supported, structured output grammar error."


def test_a_llama_cpp_python_endpoint_works_with_no_setting_and_is_asked_its_way_from_then_on(
        postgres, key_file, tmp_path_factory):
    with extraction_server(postgres, key_file, tmp_path_factory, flavour="llama-cpp-python") as rig:
        agent = rig.agent()
        rig.fake.script_chat(LYON, {"items": []})
        for _ in range(2):
            subject = unique("subject")
            done, _ = finished(agent, subject, extract(agent, subject, turn("t1", "I live in Lyon")))
            assert done.state == svc.EXTRACTION_JOB_STATE_SUCCEEDED and done.attempts == 1
        kinds = [r.body["response_format"]["type"] for r in rig.fake.chat_requests]
        assert kinds == ["json_schema", "json_object", "json_object"]
        assert "using output mode json_object" in rig.log.read_text()


def test_a_turn_naming_response_format_echoed_in_an_error_changes_nothing_for_another_tenant(
        postgres, key_file, tmp_path_factory):
    with extraction_server(postgres, key_file, tmp_path_factory) as rig:
        first, second = rig.agent(), rig.agent()  # two tenants
        rig.fake.script_chat("echo", LYON)  # HTTP 400 repeating the messages, the turn's words with them
        subject = unique("subject")
        done, _ = finished(first, subject, extract(first, subject, turn("t1", FORMAT_WORDS)))
        assert done.state == svc.EXTRACTION_JOB_STATE_FAILED and done.attempts == 1
        assert done.error == "the extraction model refused the request: HTTP 400"
        other = unique("subject")
        done, _ = finished(second, other, extract(second, other, turn("t1", "I live in Lyon")))
        assert done.state == svc.EXTRACTION_JOB_STATE_SUCCEEDED and len(done.results) == 1
        # The other tenant's job is asked as before: the endpoint took memoryd's own probe.
        kinds = [r.body["response_format"]["type"] for r in rig.fake.chat_requests]
        assert kinds == ["json_schema", "json_schema"]
        assert [p.body["response_format"]["type"] for p in rig.fake.probes] == ["json_schema"]
        assert "using output mode" not in rig.log.read_text()


def test_an_ollama_that_ignores_the_schema_still_gives_memories(postgres, key_file, tmp_path_factory):
    with extraction_server(postgres, key_file, tmp_path_factory, flavour="ollama-0.4") as rig:
        agent = rig.agent()
        subject = unique("subject")
        rig.fake.script_chat(LYON)
        done, _ = finished(agent, subject, extract(agent, subject, turn("t1", "I live in Lyon")))
        assert done.state == svc.EXTRACTION_JOB_STATE_SUCCEEDED
        assert [m.key for m in agent.list_all(subject)] == ["home_city"]


def test_a_refused_request_fails_at_once_and_says_its_status_in_the_job_and_the_log(
        postgres, key_file, tmp_path_factory):
    with extraction_server(postgres, key_file, tmp_path_factory, flavour="vllm",
                           MEMORYD_EXTRACTION_MAX_TOKENS="8192") as rig:
        agent = rig.agent()
        subject = unique("subject")
        done, _ = finished(agent, subject, extract(agent, subject, turn("t1", "I live in Lyon")))
        assert done.state == svc.EXTRACTION_JOB_STATE_FAILED and done.attempts == 1
        assert done.error == "the extraction model refused the request: HTTP 400"
        # The log names the error's own type, never its words (vLLM's would repeat the prompt's size).
        assert "HTTP 400; the server's error has type=BadRequestError code=400" in rig.log.read_text()
        assert agent.list_all(subject) == [] and len(rig.fake.chat_requests) == 1


def test_replicas_together_never_send_more_requests_at_once_than_the_deployments_concurrency(
        postgres, key_file, tmp_path_factory):
    with extraction_server(postgres, key_file, tmp_path_factory, MEMORYD_EXTRACTION_CONCURRENCY="1") as rig, \
            rig.replica(tmp_path_factory.mktemp("replica")):
        # Two servers, one job loop each, both polling the shared queue: only the slot in
        # Postgres keeps the second from sending a request while the first has one out.
        agent = rig.agent()
        subjects = [unique("subject") for _ in range(6)]
        rig.fake.script_chat(*[Slow(0.3, LYON) for _ in subjects])
        jobs = [(s, extract(agent, s, turn("t1", "I live in Lyon"))) for s in subjects]
        for subject, job_id in jobs:
            done, _ = finished(agent, subject, job_id)
            assert done.state == svc.EXTRACTION_JOB_STATE_SUCCEEDED
        assert rig.fake.chat_peak == 1 and len(rig.fake.chat_requests) == 6


def test_after_a_timeout_the_model_is_left_alone_as_long_again_and_the_job_is_retried(
        postgres, key_file, tmp_path_factory):
    with extraction_server(postgres, key_file, tmp_path_factory, MEMORYD_EXTRACTION_CONCURRENCY="1",
                           MEMORYD_EXTRACTION_TIMEOUT_SECONDS="1.0") as rig:
        agent = rig.agent()
        first, second = unique("subject"), unique("subject")
        # The first request takes 2.5 s: memoryd gives up on it after 1 s, but the model's
        # server is still working on it, so nothing more is sent until 1 s more has passed.
        rig.fake.script_chat(Slow(2.5, LYON), LYON, LYON)
        jobs = [(first, extract(agent, first, turn("t1", "I live in Lyon")))]
        wait_until(lambda: rig.fake.chat_requests, what="the first job's request reaches the model")
        jobs.append((second, extract(agent, second, turn("t1", "I live in Lyon"))))
        results = [finished(agent, subject, job_id)[0] for subject, job_id in jobs]
        assert [r.state for r in results] == [svc.EXTRACTION_JOB_STATE_SUCCEEDED] * 2
        assert results[0].attempts == 2 and results[1].attempts == 1
        arrivals = [r.at for r in rig.fake.chat_requests]
        assert len(arrivals) == 3
        assert arrivals[1] - arrivals[0] >= 1.9  # the timeout, then as long again
        assert arrivals[2] - arrivals[0] >= 1.9
