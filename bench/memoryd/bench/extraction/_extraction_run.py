"""Driving ``memoryd bench extraction``: a server with an extraction model, one subject per
dialogue, every dialogue's turns sent in extract mode, every job awaited, and everything the
API then returns about each subject read for leaks.

Protocol: by default an ``EmbeddedServer`` starts with ``MEMORYD_EXTRACTION_*`` pointing at the
model (``--url``, or the in-process ``ScriptedModel``), and a new tenant gets a stored full view
for the agent ``bench-extraction`` (through ``PutView``, with a tenant admin token signed by the
server's own key). With ``addr`` the run uses a server already running there, with the model
*it* is configured with: the admin token given (``--admin-token``) stores the same view in its
own tenant and mints the agent's token with ``IssueToken``, and the subjects carry a fresh run
id, so a run never reads what an earlier one wrote. Each dialogue is one subject,
``<prefix>-<dialogue id>``; its turns go in one ``Write`` with ``TURN_MODE_EXTRACT``, all
dialogues one after the other, so the jobs queue together and the server's worker takes them at
its own pace (its concurrency). Then every job is polled with ``GetExtractionJob`` until it has
ended or ``wait`` seconds have passed since the last Write; a job still queued or running then is
reported as not finished. Last, for each subject, the leak check's evidence (``Seen``) is read:
the job's answer, every memory, active or forgotten, through ``MemoryView`` (whole messages, every
field), every version of each through ``GetHistory``, and ``Recall`` with the prompt block for
``LEAK_QUERIES`` and the dialogue's own queries (``min_relevance`` 0, so the block holds what
ranks highest however weakly). The active memories are what recall and precision score. Seconds
per job are the job's own ``created_at`` → ``finished_at``: queueing behind other jobs included.
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
from google.protobuf.duration_pb2 import Duration
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from memoryd.client import NO_RETRY, TLS, MemorydClient, MemorydError
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc
from memoryd.v1 import token_admin_service_pb2 as tokens
from memoryd.v1 import view_admin_service_pb2 as admin

from ._extraction_set import (
    DEFAULT_DIALOGUES,
    LEAK_QUERIES,
    Dialogue,
    Outcome,
    Seen,
    Stored,
    load_dialogues,
    strings_of,
)
from .._locomo import BenchError, rpc_failure, timestamp
from memoryd.cli import Progress
from ._scripted_model import ScriptedModel
from .._server import EmbeddedServer

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
    addr: str | None = None  # None: start an embedded server
    tls: TLS | None = None  # how to speak to addr (None: plaintext)
    admin_token: str = ""  # a tenant admin's token on addr: the tenant the run writes in
    port: int = 0  # the embedded server's port (0: a free one)

    @property
    def scripted(self) -> bool:
        return self.url is None and self.addr is None

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


def _seconds(job: svc.ExtractionJob) -> float | None:
    if not job.HasField("created_at") or not job.HasField("finished_at"):
        return None
    return (job.finished_at.ToNanoseconds() - job.created_at.ToNanoseconds()) / 1e9


def _full_view() -> pb.View:
    every = [pb.ViewRule(category=c, key_patterns=["*"]) for c in pb.Category.values()
             if c != pb.CATEGORY_UNSPECIFIED]
    fields = [f.name for f in pb.Memory.DESCRIPTOR.fields if f.name != "content_unavailable"]
    return pb.View(agent=AGENT, read_rules=every, write_rules=every, may_erase=True, visible_fields=fields,
                   description="extraction benchmark (memoryd bench extraction)")


def _leaves(message: Message) -> list[tuple[str, str]]:
    # The whole message, with proto field names, so a field added later is read as well.
    return strings_of(MessageToDict(message, preserving_proto_field_name=True))


def _kind(path: str) -> str:
    """The Memory field a path starts with: text, key, tags, data, provenance, …"""
    return path.split(".", 1)[0].split("[", 1)[0].split("{", 1)[0]


def memory_seen(memory: pb.Memory) -> list[Seen]:
    """A memory as MemoryView returned it: each string under the field it is in."""
    return [Seen(_kind(path), f"memory {memory.id} {path}", value) for path, value in _leaves(memory)]


def history_seen(memory_id: str, version: svc.MemoryVersion) -> list[Seen]:
    return [Seen("history", f"history {memory_id} v{version.memory.version} {path}", value)
            for path, value in _leaves(version)]


def recall_seen(query: str, answer: svc.RecallResponse) -> list[Seen]:
    """Recall's prompt block, and every returned memory whole (kind ``recall``)."""
    return [Seen("block", f"Recall({query!r}) block", answer.block),
            *(Seen("recall", f"Recall({query!r}) memories[{i}] {path}", value)
              for i, scored in enumerate(answer.memories) for path, value in _leaves(scored))]


def job_seen(job: svc.ExtractionJob) -> list[Seen]:
    """The job's GetExtractionJob answer: results (their reasons), error, dropped counts."""
    return [Seen("job", f"job {path}", value) for path, value in _leaves(job)]


class _Session:
    """The run's calls, as the benchmark's agent (an admin client puts its view first, and
    ``agent_token`` gives the agent's token, by the admin client when it mints one)."""

    def __init__(self, channel: grpc.Channel, target: str, options: ExtractionOptions, admin_token: str,
                 agent_token: Callable[[MemorydClient], str]) -> None:
        self.target, self.options = target, options
        # No retries: a benchmark counts what fails rather than hiding it.
        admin_client = MemorydClient(channel=channel, token=admin_token, timeout=options.deadline, retry=NO_RETRY)
        self.call(lambda: admin_client.put_view(admin.PutViewRequest(view=_full_view())), "PutView")
        self.client = MemorydClient(channel=channel, token=agent_token(admin_client), timeout=options.deadline,
                                    retry=NO_RETRY)

    @classmethod
    def in_new_tenant(cls, channel: grpc.Channel, target: str, key_file: Path,
                      options: ExtractionOptions) -> _Session:
        """A fresh tenant, its tokens signed with the server's own key (the embedded run)."""
        from memoryd.server import issue_token, load_signing_key  # deferred: see memoryd.cli (commands start light)

        key, tenant = load_signing_key(key_file), f"extraction-bench-{uuid.uuid4().hex[:8]}"
        admin_token = issue_token(key, tenant=tenant, agent="bench-admin", roles=("admin",), ttl_seconds=600)
        return cls(channel, target, options, admin_token,
                   lambda _: issue_token(key, tenant=tenant, agent=AGENT, ttl_seconds=_ttl(options)))

    @classmethod
    def as_tenant_admin(cls, channel: grpc.Channel, target: str, options: ExtractionOptions) -> _Session:
        """The admin token's tenant on a running server: the agent's token minted by IssueToken."""
        def mint(admin_client: MemorydClient) -> str:
            request = tokens.IssueTokenRequest(agent=AGENT, roles=[tokens.TOKEN_ROLE_AGENT],
                                               lifetime=Duration(seconds=_ttl(options)),
                                               reason="memoryd bench extraction")
            try:
                return str(admin_client.issue_token(request).token)
            except MemorydError as error:
                if error.code != grpc.StatusCode.INVALID_ARGUMENT:
                    raise rpc_failure("IssueToken", error, target) from None
            # The lifetime reaches past the admin token's own expiry: as long as that one, then.
            request.ClearField("lifetime")
            try:
                return str(admin_client.issue_token(request).token)
            except MemorydError as error:
                raise rpc_failure("IssueToken", error, target) from None

        return cls(channel, target, options, options.admin_token, mint)

    def call(self, send: Callable[[], R], what: str) -> R:
        try:
            return send()
        except MemorydError as error:
            raise rpc_failure(what, error, self.target) from None

    def queue(self, subject: str, dialogue: Dialogue) -> str:
        turns = [pb.Turn(turn_id=t.turn_id, speaker=t.speaker, text=t.text, time=timestamp(t.time))
                 for t in dialogue.turns]
        request = svc.WriteRequest(subject=subject, turns=turns, turn_mode=svc.TURN_MODE_EXTRACT)
        response = self.call(lambda: self.client.write(request), f"Write({subject}, extract)")
        if not response.extraction_job_id:
            raise BenchError(f"Write({subject}) queued no extraction job")
        return str(response.extraction_job_id)

    def job(self, subject: str, job_id: str) -> svc.ExtractionJob:
        request = svc.GetExtractionJobRequest(subject=subject, job_id=job_id)
        return self.call(lambda: self.client.get_extraction_job(request), f"GetExtractionJob({subject})").job

    def memories(self, subject: str) -> list[pb.Memory]:
        """Every memory of the subject, active or forgotten (a forgotten one is still served to a
        view that asks for it; replaced values are versions, read by ``versions``)."""
        statuses = [pb.MEMORY_STATUS_ACTIVE, pb.MEMORY_STATUS_FORGOTTEN]
        found: list[pb.Memory] = []
        token = ""
        while True:
            request = svc.MemoryViewRequest(subject=subject, statuses=statuses, page_size=100, page_token=token)
            page = self.call(functools.partial(self.client.memory_view, request), f"MemoryView({subject})")
            found += page.memories
            token = page.next_page_token
            if not token:
                return found

    def versions(self, subject: str, memory_id: str) -> list[svc.MemoryVersion]:
        found: list[svc.MemoryVersion] = []
        token = ""
        while True:
            request = svc.GetHistoryRequest(subject=subject, memory_id=memory_id, page_size=100, page_token=token)
            page = self.call(functools.partial(self.client.get_history, request), f"GetHistory({subject})")
            found += page.versions
            token = page.next_page_token
            if not token:
                return found

    def evidence(self, subject: str, dialogue: Dialogue,
                 job: svc.ExtractionJob) -> tuple[tuple[Stored, ...], tuple[Seen, ...]]:
        """The active memories (scored) and every string the API returns about the subject."""
        seen = job_seen(job)
        stored = []
        for memory in self.memories(subject):
            seen += memory_seen(memory)
            for version in self.versions(subject, memory.id):
                seen += history_seen(memory.id, version)
            if memory.status == pb.MEMORY_STATUS_ACTIVE:
                stored.append(Stored(pb.Category.Name(memory.category).removeprefix("CATEGORY_").lower(),
                                     memory.key, memory.text))
        for query in dict.fromkeys((*LEAK_QUERIES, *dialogue.recall_queries)):
            request = svc.RecallRequest(subject=subject, query=query, top_k=20, render_block=True, min_relevance=0)
            answer = self.call(functools.partial(self.client.recall, request), f"Recall({subject}, {query!r})")
            seen += recall_seen(query, answer)
        return tuple(stored), tuple(seen)


def _ttl(options: ExtractionOptions) -> int:
    return int(options.wait + options.start_timeout + 3600)


@contextlib.contextmanager
def _model(options: ExtractionOptions, dialogues: tuple[Dialogue, ...]) -> Iterator[tuple[str, ScriptedModel | None]]:
    if options.url is not None:
        yield options.url, None
        return
    with ScriptedModel(dialogues) as scripted:
        yield scripted.base_url, scripted


@contextlib.contextmanager
def _session(options: ExtractionOptions, dialogues: tuple[Dialogue, ...],
             result: ExtractionResult) -> Iterator[_Session]:
    """The run's session: on ``options.addr``, or on an embedded server started with the model."""
    if options.addr is not None:
        result.server = {"embedded": False, "addr": options.addr, "tls": options.tls is not None}
        tls = options.tls
        channel = (grpc.insecure_channel(options.addr) if tls is None
                   else grpc.secure_channel(options.addr, tls.channel_credentials(), options=tls.channel_options()))
        with channel:
            yield _Session.as_tenant_admin(channel, options.addr, options)
        return
    with _model(options, dialogues) as (url, scripted), \
            EmbeddedServer(start_timeout=options.start_timeout, environment=options.environment(url),
                           port=options.port) as server:
        result.server = {"embedded": True, "addr": server.target, "passed_on": list(server.passed_on)}
        with grpc.insecure_channel(server.target) as channel:
            yield _Session.in_new_tenant(channel, server.target, server.signing_key_path, options)
        if scripted is not None:
            result.model_requests = scripted.requests


def run_extraction(options: ExtractionOptions, progress: TextIO | None = None) -> ExtractionResult:
    dialogues = load_dialogues(options.dialogues)
    result = ExtractionResult(options)
    started = time.perf_counter()
    # On a shared server the subjects carry a run id: nothing an earlier run stored is scored or read.
    prefix = options.subject_prefix if options.addr is None else f"{options.subject_prefix}-{uuid.uuid4().hex[:8]}"
    with _session(options, dialogues, result) as session:
        subjects = {d.id: f"{prefix}-{d.id}" for d in dialogues}
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
            stored, seen = session.evidence(subjects[d.id], d, job)
            result.outcomes.append(Outcome(d, state, error, {c.reason: c.count for c in job.dropped},
                                           _seconds(job), stored, dict(written), seen))
    result.seconds = time.perf_counter() - started
    return result
