"""How long a job waits for a model that is out (``outage_delay``), and what a server's
``Retry-After`` asks for (``retry_after``): pure arithmetic, tested alone."""

from __future__ import annotations

import email.utils

import pytest

from memoryd.server.ingest._model_outage import outage_delay
from memoryd.storage.models._http_endpoint import MAX_RETRY_AFTER, retry_after

NOW = 1_445_412_000.0  # Wed, 21 Oct 2015 07:20:00 GMT


def lowest() -> float:
    return 0.0


def highest() -> float:
    return 0.999999999


@pytest.mark.parametrize("outages, expected", [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0)], ids=lambda v: str(v))
def test_the_wait_doubles_with_each_outage(outages, expected):
    assert outage_delay(outages, 0.5, 300.0, rand=highest) == pytest.approx(expected)


def test_the_wait_is_capped_even_after_very_many_outages():
    assert outage_delay(12, 0.5, 300.0, rand=highest) == pytest.approx(300.0)
    assert outage_delay(10_000, 0.5, 300.0, rand=highest) == pytest.approx(300.0)  # no overflow


def test_jitter_takes_off_at_most_half():
    for outages in range(12):
        full = min(0.5 * 2 ** outages, 300.0)
        assert outage_delay(outages, 0.5, 300.0, rand=lowest) == pytest.approx(full / 2)
        assert full / 2 <= outage_delay(outages, 0.5, 300.0) <= full


def test_a_server_asking_for_longer_is_waited_for_at_least_that_long():
    assert outage_delay(0, 0.5, 300.0, retry_after=42.0, rand=lowest) == 42.0
    assert outage_delay(0, 0.5, 300.0, retry_after=1000.0, rand=highest) == 1000.0  # past the cap too
    assert outage_delay(5, 0.5, 300.0, retry_after=0.0, rand=highest) == pytest.approx(16.0)  # asks for nothing
    assert outage_delay(0, 0.5, 300.0, at_least=7.0, rand=lowest) == 7.0


def test_the_wait_never_goes_past_the_horizon():
    assert outage_delay(20, 0.5, 300.0, remaining=12.0, rand=highest) == 12.0
    assert outage_delay(0, 0.5, 300.0, retry_after=MAX_RETRY_AFTER, remaining=30.0) == 30.0
    assert outage_delay(3, 0.5, 300.0, remaining=-5.0) == 0.0  # already past: tried (and given up) at once


@pytest.mark.parametrize("header, expected", [
    ("120", 120.0),
    (" 7 ", 7.0),
    ("0", 0.0),
    ("Wed, 21 Oct 2015 07:28:00 GMT", 480.0),
    ("Wed, 21 Oct 2015 07:00:00 GMT", 0.0),  # a date past: at once
    ("9" * 400, MAX_RETRY_AFTER),  # huge: finite, capped
    ("Fri, 31 Dec 9999 23:59:59 GMT", MAX_RETRY_AFTER),
    (None, None),
    ("", None),
    ("soon", None),
    ("-5", None),  # negative delta-seconds are not delta-seconds
    ("1.5", None),  # nor are fractions
    ("²", None),  # a digit to str.isdigit(), not to float()
    ("٣", None),  # Arabic-Indic three: HTTP's digits are ASCII
    ("Wed, 32 Oct 2015 07:28:00 GMT", None),
    ("Wed, 21 Oct 2015 07:28:00", None),  # a date without its zone is not an HTTP date
], ids=["seconds", "padded", "zero", "date", "past-date", "huge", "far-date", "missing", "empty", "word", "negative",
        "fraction", "superscript", "arabic-digit", "bad-day", "no-zone"])
def test_retry_after_reads_seconds_and_http_dates(header, expected):
    assert retry_after(header, now=NOW) == expected


def test_retry_after_reads_the_date_a_server_formats():
    assert retry_after(email.utils.formatdate(NOW + 90, usegmt=True), now=NOW) == 90.0
