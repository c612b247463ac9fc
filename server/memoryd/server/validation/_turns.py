"""Validation of turns (a Write's turns, a Recall's context) and of GetExtractionJob, with the same
Checker as every validator."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memoryd.domain import Turn
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from .._config import Limits
from .._enums import TURN_MODE
from ._checker import Checker, uuid_field

def check_turns(check: Checker, request: svc.WriteRequest) -> tuple[tuple[Turn, ...], bool]:
    """The request's turns and whether they are to be chunked (else extracted)."""
    chunk = bool(check.enum("turn_mode", request.turn_mode, TURN_MODE.to_domain, default=False))
    return turns_from(check, "turns", request.turns, "send longer conversations in several Writes"), chunk


def turns_from(check: Checker, field: str, turns: Sequence[pb.Turn], longer: str) -> tuple[Turn, ...]:
    """The turns of ``field`` (a Write's turns, a Recall's context), each checked the same way
    and their texts together within ``max_turns_text_bytes``; ``longer`` tells the caller what
    to do with a longer conversation. Only turns without a violation are returned."""
    out: list[Turn] = []
    seen: set[str] = set()
    for i, turn in enumerate(turns):
        path = f"{field}[{i}]"
        before = len(check.violations)
        turn_id = turn.turn_id  # its grammar, its length and its presence are annotated rules
        if turn_id in seen:
            check.fail(f"{path}.turn_id", "must be unique within the request")
        seen.add(turn_id)
        speaker = turn.speaker
        if speaker and not speaker.strip():
            check.fail(f"{path}.speaker", "must not be blank")
        text = check.text(f"{path}.text", turn.text, check.limits.max_text_bytes)
        if text and not text.strip():
            check.fail(f"{path}.text", "must not be blank")
        time = check.timestamp(turn, "time", f"{path}.time")
        if len(check.violations) == before and time is not None:
            out.append(Turn(turn_id, " ".join(speaker.split()), text, time))
    total = sum(len(turn.text.encode()) for turn in turns)
    if total > check.limits.max_turns_text_bytes:
        check.fail(field, f"the turns' texts must total at most {check.limits.max_turns_text_bytes} bytes "
                          f"(got {total}); {longer}")
    return tuple(out)


@dataclass(frozen=True)
class JobCommand:
    subject: str
    job_id: str


def validate_get_extraction_job(request: svc.GetExtractionJobRequest, limits: Limits) -> JobCommand:
    check = Checker(limits, request)
    subject = check.subject("subject", request.subject)
    job_id = uuid_field(check, "job_id", request.job_id, required=True)
    check.done()
    return JobCommand(subject, job_id)
