"""Driving ``memoryd bench extraction``: a throw-away embedded server with an extraction model,
one subject per dialogue, every dialogue's turns sent in extract mode, every job awaited.

Protocol: an ``EmbeddedServer`` starts with ``MEMORYD_EXTRACTION_*`` pointing at the model
(``--url``, or the in-process ``ScriptedModel``). A new tenant gets a stored full view for the
agent ``bench-extraction`` (through ``PutView``, with a tenant admin token signed by the
server's own key). Each dialogue is one subject, ``<prefix>-<dialogue id>``; its turns go in
one ``Write`` with ``TURN_MODE_EXTRACT``, all dialogues one after the other, so the jobs queue
together and the server's worker takes them at its own pace (its concurrency). Then every job
is polled with ``GetExtractionJob`` until it has ended or ``wait`` seconds have passed since
the last Write; a job still queued or running then is reported as not finished. Last, each
subject's active memories are read back with ``MemoryView``. Seconds per job are the job's own
``created_at`` → ``finished_at``: queueing behind other jobs included.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeVar

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from memoryd.client import NO_RETRY, MemorydClient, MemorydError
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import view_admin_service_pb2 as admin

from ._extraction_set import DEFAULT_DIALOGUES, Dialogue, Outcome, Stored, load_dialogues
from ._locomo import BenchError, rpc_failure
from memoryd.cli import Progress
from ._scripted_model import ScriptedModel
from ._server import EmbeddedServer

AGENT = "bench-extraction"
R = TypeVar("R")
_DONE = {svc.EXTRACTION_JOB_STATE_SUCCEEDED, svc.EXTRACTION_JOB_STATE_FAILED}


@dataclass(frozen=True)
class ExtractionOptions:
    dialogues: Path = DEFAULT_DIALOGUES
    url: str | None = None  # None: the scripted stand-in model
    model: str = "scripted"
    api_key_env: str | None = None  # the variable holding the endpoint's API key
    timeout: float | None = None  # MEMORYD_EXTRACTION_TIMEOUT_SECONDS
    output_mode: str | None = None  # MEMORYD_EXTRACTION_OUTPUT, only when given
    max_tokens: int | None = None  # MEMORYD_EXTRACTION_MAX_TOKENS, only when given
    concurrency: int | None = None  # MEMORYD_EXTRACTION_CONCURRENCY, only when given
    wait: float = 600.0  # seconds for the jobs to end, from the last Write
    subject_prefix: str = "extraction"
    start_timeout: float = 180.0
    deadline: float = 30.0  # per RPC

    @property
    def scripted(self) -> bool:
        return self.url is None

    def environment(self, url: str) -> dict[str, str]:
        """The extraction settings of the embedded server."""
        env = {"MEMORYD_EXTRACTION_URL": url, "MEMORYD_EXTRACTION_MODEL": self.model}
        if self.api_key_env is not None:
            if not os.environ.get(self.api_key_env):
                raise BenchError(f"--api-key-env {self.api_key_env}: that variable is not set")
            env["MEMORYD_EXTRACTION_API_KEY"] = os.environ[self.api_key_env]
        elif self.scripted:
            env["MEMORYD_EXTRACTION_API_KEY"] = ""  # never send a real key to the stand-in
        for name, value in (("TIMEOUT_SECONDS", self.timeout), ("OUTPUT", self.output_mode),
                            ("MAX_TOKENS", self.max_tokens), ("CONCURRENCY", self.concurrency)):
            if value is not None:
                env[f"MEMORYD_EXTRACTION_{name}"] = str(value)
        return env


@dataclass
class ExtractionResult:
    options: ExtractionOptions
    outcomes: list[Outcome] = field(default_factory=list)
    server: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0  # the whole run, server start included
    jobs_wall_seconds: float = 0.0  # first Write → last job ended (or the wait ran out)
    model_requests: int | None = None  # the scripted model's count of requests


def _timestamp(turn_time: Any) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(turn_time)
    return stamp


def _seconds(job: svc.ExtractionJob) -> float | None:
    if not job.HasField("created_at") or not job.HasField("finished_at"):
        return None
    return (job.finished_at.ToNanoseconds() - job.created_at.ToNanoseconds()) / 1e9


class _Session:
    """The run's calls, as the benchmark's agent (an admin client puts its view first)."""

    def __init__(self, channel: grpc.Channel, target: str, key_file: Path, options: ExtractionOptions) -> None:
        from memoryd.server import issue_token, load_signing_key  # deferred: see memoryd.cli (commands start light)

        self.target, self.options = target, options
        key, tenant = load_signing_key(key_file), f"extraction-bench-{uuid.uuid4().hex[:8]}"
        every = [pb.ViewRule(category=c, key_patterns=["*"]) for c in pb.Category.values()
                 if c != pb.CATEGORY_UNSPECIFIED]
        fields = [f.name for f in pb.Memory.DESCRIPTOR.fields if f.name != "content_unavailable"]
        view = pb.View(agent=AGENT, read_rules=every, write_rules=every, may_erase=True, visible_fields=fields,
                       description="extraction benchmark (memoryd bench extraction)")
        admin_token = issue_token(key, tenant=tenant, agent="bench-admin", roles=("admin",), ttl_seconds=600)
        # No retries: a benchmark counts what fails rather than hiding it.
        admin_client = MemorydClient(channel=channel, token=admin_token, timeout=options.deadline, retry=NO_RETRY)
        self.call(lambda: admin_client.put_view(admin.PutViewRequest(view=view)), "PutView")
        ttl = int(options.wait + options.start_timeout + 3600)
        self.client = MemorydClient(channel=channel, token=issue_token(key, tenant=tenant, agent=AGENT, ttl_seconds=ttl),
                                    timeout=options.deadline, retry=NO_RETRY)

    def call(self, send: Callable[[], R], what: str) -> R:
        try:
            return send()
        except MemorydError as error:
            raise rpc_failure(what, error, self.target) from None

    def queue(self, subject: str, dialogue: Dialogue) -> str:
        turns = [pb.Turn(turn_id=t.turn_id, speaker=t.speaker, text=t.text, time=_timestamp(t.time))
                 for t in dialogue.turns]
        request = svc.WriteRequest(subject=subject, turns=turns, turn_mode=svc.TURN_MODE_EXTRACT)
        response = self.call(lambda: self.client.write(request), f"Write({subject}, extract)")
        if not response.extraction_job_id:
            raise BenchError(f"Write({subject}) queued no extraction job")
        return str(response.extraction_job_id)

    def job(self, subject: str, job_id: str) -> svc.ExtractionJob:
        request = svc.GetExtractionJobRequest(subject=subject, job_id=job_id)
        return self.call(lambda: self.client.get_extraction_job(request), f"GetExtractionJob({subject})").job

    def stored(self, subject: str) -> tuple[Stored, ...]:
        found, token = [], ""
        while True:
            request = svc.MemoryViewRequest(subject=subject, page_size=100, page_token=token)
            page = self.call(functools.partial(self.client.memory_view, request), f"MemoryView({subject})")
            found += [Stored(pb.Category.Name(m.category).removeprefix("CATEGORY_").lower(), m.key, m.text)
                      for m in page.memories]
            token = page.next_page_token
            if not token:
                return tuple(found)


@contextlib.contextmanager
def _model(options: ExtractionOptions, dialogues: tuple[Dialogue, ...]) -> Iterator[tuple[str, ScriptedModel | None]]:
    if options.url is not None:
        yield options.url, None
        return
    with ScriptedModel(dialogues) as scripted:
        yield scripted.base_url, scripted


def run_extraction(options: ExtractionOptions, progress: TextIO | None = None) -> ExtractionResult:
    dialogues = load_dialogues(options.dialogues)
    result = ExtractionResult(options)
    started = time.perf_counter()
    with _model(options, dialogues) as (url, scripted), \
            EmbeddedServer(start_timeout=options.start_timeout, environment=options.environment(url)) as server:
        result.server = {"embedded": True, "addr": server.target, "passed_on": list(server.passed_on)}
        with grpc.insecure_channel(server.target) as channel:
            session = _Session(channel, server.target, server.signing_key_path, options)
            subjects = {d.id: f"{options.subject_prefix}-{d.id}" for d in dialogues}
            queued = time.perf_counter()
            jobs = {d.id: session.queue(subjects[d.id], d) for d in dialogues}
            ended: dict[str, svc.ExtractionJob] = {}
            deadline = time.monotonic() + options.wait
            with Progress("jobs  ", len(dialogues), progress) as bar:
                while len(ended) < len(jobs) and time.monotonic() < deadline:
                    for d in dialogues:
                        if d.id not in ended and (job := session.job(subjects[d.id], jobs[d.id])).state in _DONE:
                            ended[d.id] = job
                            bar.advance()
                    if len(ended) < len(jobs):
                        time.sleep(0.25)
            result.jobs_wall_seconds = time.perf_counter() - queued
            for d in dialogues:
                job = ended.get(d.id) or session.job(subjects[d.id], jobs[d.id])
                state = svc.ExtractionJobState.Name(job.state).removeprefix("EXTRACTION_JOB_STATE_")
                error = job.error if job.state in _DONE else f"not finished after {options.wait:.0f} s"
                written = Counter(svc.WriteOutcome.Name(r.outcome).removeprefix("WRITE_OUTCOME_").lower()
                                  for r in job.results)
                result.outcomes.append(Outcome(d, state, error, {c.reason: c.count for c in job.dropped},
                                               _seconds(job), session.stored(subjects[d.id]), dict(written)))
        if scripted is not None:
            result.model_requests = scripted.requests
    result.seconds = time.perf_counter() - started
    return result
