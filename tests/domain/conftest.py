"""Fixtures of the pure tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memoryd.server.telemetry import _build

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def known_commit(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The commit memoryd reports it was built from, given: ``build_info()`` would ask git (a
    process, which a pure test may not start). Anything that builds the metrics needs it."""
    _build.build_info.cache_clear()
    monkeypatch.setattr(_build, "_commit", lambda: COMMIT)
    yield COMMIT
    _build.build_info.cache_clear()
