"""Turns and extraction jobs: raw dialogue in, memories out (issue 5)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime

from ._model import WriteResult


@dataclass(frozen=True)
class Turn:
    """One validated dialogue turn; memories made from it carry ``turn_id`` as source turn."""

    turn_id: str
    speaker: str
    text: str
    time: datetime


class JobState(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    # Queued after its model was out (never stored as a state: a queued job with an outage).
    WAITING = "waiting"

    @property
    def finished(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED)


@dataclass(frozen=True)
class ExtractionJob:
    """An extraction job as its subject's callers may see it (never its turns)."""

    id: str
    subject: str
    agent: str
    state: JobState
    turn_count: int
    attempts: int
    error: str
    results: tuple[WriteResult, ...]
    dropped: dict[str, int] = field(default_factory=dict)
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    next_attempt_at: datetime | None = None  # queued or waiting jobs only
    waiting_since: datetime | None = None  # waiting jobs only
