"""Decay is a function (domain/decay.py), computed by readers in SQL (projections/importance.py):
on the real Postgres, the expression every read selects gives what the domain function gives, for
active rows at any age, and leaves every other status at its published value."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from domain.decay import importance_at
from projections import pg
from projections.importance import importance_now

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


def sql_value(settings, status: str, importance: float, published: datetime | None, updated: datetime,
              at: datetime, rate: float) -> float:
    expr = importance_now(rate, at)
    with pg.connect(settings, autocommit=True) as conn:
        row = conn.execute(f"SELECT {expr} FROM (VALUES (%s, %s::real, %s::timestamptz, %s::timestamptz)) "
                           f"AS memory_items(status, importance, importance_at, updated_at)",
                           (status, importance, published, updated)).fetchone()
    return round(float(row[0]), 4)


@pytest.mark.parametrize("importance,days,rate", [(0.6, 0, 0.995), (0.6, 10, 0.995), (0.25, 45.5, 0.995),
                                                  (0.9, 400, 0.998), (1.0, 3650, 0.998), (0.0004, 1, 0.9),
                                                  # ages whose factor underflows a double: 0, not an error
                                                  (0.9, 1_000_000, 0.998), (0.0001, 100_000, 0.5)])
def test_the_sql_expression_is_the_domain_function(settings, importance, days, rate):
    at = T0 + timedelta(days=days)
    want = importance_at(importance, T0.timestamp(), at.timestamp(), rate)
    # real: the column's own precision (float4) is what readers decay
    got = sql_value(settings, "active", importance, T0, T0 - timedelta(days=99), at, rate)
    assert got == pytest.approx(want, abs=1e-4)


def test_only_active_memories_age_and_old_rows_decay_from_their_last_update(settings):
    at = T0 + timedelta(days=30)
    for status in ("outdated", "merged", "deduped", "archived", "expired"):
        assert sql_value(settings, status, 0.7, T0, T0, at, 0.995) == pytest.approx(0.7, abs=1e-6)
    # a row projected before importance_at existed: from updated_at
    assert sql_value(settings, "active", 0.7, None, T0, at, 0.995) == pytest.approx(
        importance_at(0.7, T0.timestamp(), at.timestamp(), 0.995), abs=1e-4)
    # a reader's clock before the publication (an as-of read between events) never raises it
    assert sql_value(settings, "active", 0.7, T0, T0, T0 - timedelta(days=5), 0.995) == pytest.approx(0.7, abs=1e-6)
