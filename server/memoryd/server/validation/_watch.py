"""Validation of Watch requests (every invalid field at once, like the whole package)."""

from __future__ import annotations

from dataclasses import dataclass

from memoryd.domain import Category
from memoryd.v1 import memory_service_pb2 as svc

from .._config import Limits
from .._enums import CATEGORY
from ._checker import Checker


@dataclass(frozen=True)
class WatchCommand:
    subject: str  # '' with all_subjects
    all_subjects: bool
    categories: tuple[Category, ...]
    include_org: bool
    cursor: str  # '' : start with the changes committed after the call


def validate_watch(request: svc.WatchRequest, limits: Limits) -> WatchCommand:
    check = Checker(limits, request)
    subject = check.subject("subject", request.subject)
    if request.all_subjects and subject:
        check.fail("subject", "must be empty when all_subjects is set")
    elif not request.all_subjects and not subject:
        check.fail("subject", "is required unless all_subjects is set")
    categories = tuple(dict.fromkeys(c for i, value in enumerate(request.categories)
                                     if (c := check.enum(f"categories[{i}]", value, CATEGORY.to_domain,
                                                         required=True)) is not None))
    check.done()
    return WatchCommand(subject, request.all_subjects, categories, request.include_org, request.cursor)
