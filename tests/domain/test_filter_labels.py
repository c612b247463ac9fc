"""A read filter is compiled only once its key patterns are labelled (resolved); the compilers on
PostgreSQL and Milvus: tests/storage/test_filter_compiler.py."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from memoryd.domain import Category, Internal, ReadFilter
from memoryd.storage._filters import filter_expression, read_conditions

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def test_a_filter_that_was_not_labelled_is_refused_by_both_compilers():
    flt = ReadFilter(subject="alice", rules=((Category.FACT, ("*",)),))
    with pytest.raises(Internal):
        read_conditions(SimpleNamespace(tenant="t"), flt)
    with pytest.raises(Internal):
        filter_expression(SimpleNamespace(tenant="t"), flt, NOW)
