"""A memory's importance as of a time, in SQL: domain/decay.py's function, for the read models.

The memory topic publishes an importance only when something happens to a memory (created,
reinforced, merged, deduped, revived, lowered when idle, archived); the projector keeps it with
the time it was published (`importance_at`). Every read that shows or ranks by importance selects
this expression instead of the column, so it decays the published value to the reader's time,
as the memory processor does: only active memories age, at `decay_rate` a day, rounded to 4
digits. Rows projected before `importance_at` existed decay from their last update. Tested
against domain/decay.py on the stack (tests/test_decay_function.py).
"""
from __future__ import annotations

import math
from datetime import datetime, timezone

# Postgres raises "value out of range: underflow" when power() or a product rounds a nonzero
# value to 0 (an as-of read in the year 4855 did, through the API). Past e^-690 the value is 0 at
# 4 digits anyway, so the age is capped there: the result is the domain function's, never an error.
_SMALLEST_FACTOR_LOG = -690.0


def importance_now(decay_rate: float, at: datetime | None = None) -> str:
    """The SQL expression (over memory_items' columns) of importance at `at` (default: now())."""
    rate = float(decay_rate)                  # a float, written as a number: never text into SQL
    if at is None:
        when = "now()"
    else:
        when = f"'{at.astimezone(timezone.utc).isoformat()}'::timestamptz"   # a datetime's own ISO form
    days = f"greatest(0, extract(epoch FROM {when} - coalesce(importance_at, updated_at)) / 86400.0)"
    if rate < 1.0:
        days = f"least({days}, {_SMALLEST_FACTOR_LOG / math.log(rate)!r})"
    return (f"(CASE WHEN status = 'active' THEN round((importance * power({rate!r}::float8, {days}))::numeric, 4)::real "
            f"ELSE importance END)")
