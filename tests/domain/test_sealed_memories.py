"""A memory whose content cannot be opened is presented as such, whatever the view shows
(encryption at rest end to end: tests/e2e/test_encryption_at_rest.py)."""

from __future__ import annotations


def test_content_unavailable_is_sent_whatever_fields_the_view_shows():
    from datetime import UTC, datetime

    from memoryd.domain import Category, Memory, Scope, SourceKind, Stability, Status
    from memoryd.server.present._memory import memory as to_proto
    from memoryd.server.present._block import render_block

    now = datetime.now(UTC)
    lost = Memory("m-1", "alice", Scope.SUBJECT, "", Category.FACT, "home_city", "", None, 0.5, 1.0,
                  Stability.STABLE, False, (), None, None, "agent-1", SourceKind.INPUT, "", 1, Status.ACTIVE,
                  now, now, content_unavailable=True)

    assert to_proto(lost, frozenset()).content_unavailable is True
    assert to_proto(lost, frozenset({"id"})).content_unavailable is True
    assert "home_city" not in render_block([lost], frozenset({"key", "text", "category"}))
