"""The suite's own ``wait_until`` (tests/support.py): waits that end when the condition holds."""

from __future__ import annotations

import pytest

from ..support import wait_until


def test_the_first_truthy_answer_is_returned():
    answers = iter([0, None, "", [], "indexed"])
    assert wait_until(lambda: next(answers), timeout=5, interval=0) == "indexed"


def test_a_condition_that_never_holds_fails_naming_it_its_last_answer_and_the_diagnosis():
    with pytest.raises(AssertionError, match=r"after 0\.05s waiting until the index catches up; last: \[\]\nlog tail"):
        wait_until(lambda: [], timeout=0.05, interval=0.01, what="the index catches up", diagnose=lambda: "log tail")


def test_an_ignored_exception_means_not_yet_and_any_other_fails_at_once():
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("not listening yet")
        return "up"

    assert wait_until(flaky, timeout=5, interval=0, ignoring=ConnectionError) == "up"
    with pytest.raises(KeyError):
        wait_until(lambda: {}["missing"], timeout=5, ignoring=ConnectionError)
