"""Event time without services: the record-time rule (schemas/records.py) and relative dates that
leave the calendar. Event time through the real pipeline: tests/test_event_time.py."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from kernel.errors import InvalidEvent
from schemas.records import check_record_time


def test_the_record_time_rule():
    appended = datetime(2026, 6, 1, tzinfo=timezone.utc)
    ms = int(appended.timestamp() * 1000)
    check_record_time(appended + timedelta(seconds=299), ms, 300)            # within the skew
    check_record_time(datetime(1970, 1, 1, tzinfo=timezone.utc), ms, 300)   # the epoch itself
    check_record_time(appended + timedelta(days=365), None, 300)             # no broker time: not judged
    with pytest.raises(InvalidEvent, match="after the broker appended the record"):
        check_record_time(appended + timedelta(seconds=301), ms, 300)
    with pytest.raises(InvalidEvent, match="before 1970-01-01"):
        check_record_time(datetime(1969, 12, 31, 23, 59, tzinfo=timezone.utc), None, 300)


def test_a_relative_date_that_leaves_the_calendar_is_left_unresolved_and_the_fact_kept():
    from domain.extraction import extract_facts
    from domain.text import relative_dates
    first_day = datetime(1, 1, 1, tzinfo=timezone.utc)
    assert relative_dates("I went there yesterday", first_day) == []
    got = relative_dates("yesterday and tomorrow", first_day)
    assert [r.label for r in got] == ["0001-01-02"]        # the phrase in range is still resolved
    facts = extract_facts("I bought a red car yesterday", first_day)
    assert facts and "red car" in facts[0].content
