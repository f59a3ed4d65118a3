"""The memories list's filters and cursor, compiled to SQL over memory_items (pure: no connection).

A filter is Mem0-style JSON (docs/api.md#memories-as-a-resource):

    {"and": [{"agent_id": "planner"}, {"metadata.topic": {"in": ["travel", "food"]}},
             {"or": [{"importance": {"gte": 0.5}}, {"created_at": {"gte": "2026-01-01T00:00:00Z"}}]}]}

- a combinator: {"and": [...]} or {"or": [...]} (also AND / OR), nested at most MAX_DEPTH deep;
- a condition: {field: value} (equality) or {field: {op: value, ...}} (several ops: all must hold),
  ops eq, ne, in, nin, gt, gte, lt, lte;
- fields: the columns status, category, agent_id, run_id, memory_id, session (text: eq ne in nin),
  importance (a number: every op), created_at, updated_at (ISO 8601 date-times with a timezone: every
  op but in/nin), and metadata: `metadata.<key>` or {"metadata": {<key>: value-or-ops}}.

Every value is a query parameter and every column an identifier from the list below: nothing a caller
sends is ever formatted into SQL text. Metadata equality is `metadata @> {key: value}` (served by the
GIN jsonb_path_ops index, projections/pg.py), ne/nin its negation (a memory without the key matches),
and comparisons a fixed SQL/JSON path over `metadata -> key` with the value as a path variable:
numbers compare as numbers, strings (ISO dates included) as text, mixed types never match (no error).
The user's own rows are found first by the (user_id, …) btrees; nothing is filtered in Python.

The cursor is opaque to callers: created_at (microseconds) and memory_id of the last row a page
held; the list's order is (created_at, memory_id), stable under concurrent writes of newer rows.
"""
from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson
from psycopg import sql
from psycopg.types.json import Jsonb

from kernel.errors import InvalidInput
from schemas.limits import METADATA_KEY_MAX_CHARS, check_content, check_id

MAX_DEPTH = 6
MAX_CONDITIONS = 32
MAX_IN = 100
TEXT_COLUMNS = ("status", "category", "agent_id", "run_id", "memory_id", "session")
NUMBER_COLUMNS = ("importance",)
TIME_COLUMNS = ("created_at", "updated_at")
OPS = {"eq": "=", "ne": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
SET_OPS = ("in", "nin")
COMBINATORS = {"and": " AND ", "or": " OR "}
# SQL/JSON path comparisons: fixed text, the value is the path variable $v (never formatted in).
_PATH = {"gt": "$ ? (@ > $v)", "gte": "$ ? (@ >= $v)", "lt": "$ ? (@ < $v)", "lte": "$ ? (@ <= $v)"}
TRUE = sql.SQL("true")


class _Compiler:
    """Compiles a filter; each value becomes a parameter: positional (%s, `params` a list) or, given a
    prefix, named (%(<prefix>0)s …, `params` a dict) so the condition can join a query of named ones."""

    def __init__(self, prefix: str | None = None) -> None:
        self.prefix = prefix
        self.params: Any = {} if prefix else []
        self.conditions = 0

    def bind(self, value: Any) -> sql.Placeholder:
        if self.prefix is None:
            self.params.append(value)
            return sql.Placeholder()
        name = f"{self.prefix}{len(self.params)}"
        self.params[name] = value
        return sql.Placeholder(name)

    def node(self, f: Any, where: str, depth: int) -> sql.Composable:
        if not isinstance(f, dict):
            raise InvalidInput(f"{where}: a filter is a JSON object (a field condition, or 'and'/'or' with a list)")
        if not f:
            return TRUE   # {}: no condition (as in Mem0)
        if depth > MAX_DEPTH:
            raise InvalidInput(f"{where}: filters nest at most {MAX_DEPTH} levels deep")
        parts = []
        for key, value in f.items():
            low = key.lower() if isinstance(key, str) else key
            if low in COMBINATORS:
                if not isinstance(value, list) or not value:
                    raise InvalidInput(f"{where}.{key}: must be a non-empty list of filters")
                subs = [self.node(v, f"{where}.{key}[{i}]", depth + 1) for i, v in enumerate(value)]
                parts.append(sql.SQL("(") + sql.SQL(COMBINATORS[low]).join(subs) + sql.SQL(")"))
            elif key == "metadata":
                if not isinstance(value, dict) or not value:
                    raise InvalidInput(f"{where}.metadata: must be an object of metadata keys to values or "
                                       "conditions")
                parts.extend(self.metadata(k, v, f"{where}.metadata.{k}") for k, v in value.items())
            elif isinstance(key, str) and key.startswith("metadata."):
                parts.append(self.metadata(key.removeprefix("metadata."), value, f"{where}.{key}"))
            else:
                parts.append(self.column(key, value, f"{where}.{key}"))
        return parts[0] if len(parts) == 1 else sql.SQL("(") + sql.SQL(" AND ").join(parts) + sql.SQL(")")

    def _count(self, where: str) -> None:
        self.conditions += 1
        if self.conditions > MAX_CONDITIONS:
            raise InvalidInput(f"{where}: at most {MAX_CONDITIONS} conditions in one filter")

    @staticmethod
    def _ops(value: Any, where: str) -> list[tuple[str, Any]]:
        if isinstance(value, dict):
            if not value:
                raise InvalidInput(f"{where}: an empty condition")
            bad = [k for k in value if k not in OPS and k not in SET_OPS]
            if bad:
                raise InvalidInput(f"{where}: unknown operator {bad[0]!r} (known: eq, ne, in, nin, gt, gte, lt, lte)")
            return list(value.items())
        return [("eq", value)]

    def column(self, field: Any, value: Any, where: str) -> sql.Composable:
        if field not in TEXT_COLUMNS + NUMBER_COLUMNS + TIME_COLUMNS:
            raise InvalidInput(f"{where}: unknown filter field (known: {', '.join(TEXT_COLUMNS + NUMBER_COLUMNS + TIME_COLUMNS)}, "
                               "metadata.<key>, and, or)")
        out = []
        for op, v in self._ops(value, where):
            self._count(where)
            col = sql.Identifier(field)
            if op in SET_OPS:
                if field in TIME_COLUMNS:
                    raise InvalidInput(f"{where}.{op}: {field} takes eq, ne, gt, gte, lt, lte")
                values = self._list(v, f"{where}.{op}")
                arr = sql.SQL("{}::real[]" if field in NUMBER_COLUMNS else "{}::text[]").format(
                    self.bind([self._scalar(field, x, f"{where}.{op}") for x in values]))
                cond = sql.SQL("{} = ANY({})").format(col, arr)
                out.append(cond if op == "in" else sql.SQL("NOT coalesce({}, false)").format(cond))
                continue
            if field in TEXT_COLUMNS and op not in ("eq", "ne"):
                raise InvalidInput(f"{where}.{op}: {field} is text: it takes eq, ne, in, nin")
            # importance is a real column: compared as a real (0.7 = 0.7, never 0.699999988 vs 0.7)
            p = sql.SQL("{}::real" if field in NUMBER_COLUMNS else "{}").format(
                self.bind(self._scalar(field, v, f"{where}.{op}")))
            if op == "ne":   # a missing value (NULL) is not equal to any value
                out.append(sql.SQL("{} IS DISTINCT FROM {}").format(col, p))
            else:
                out.append(sql.SQL("{} " + OPS[op] + " {}").format(col, p))
        return out[0] if len(out) == 1 else sql.SQL("(") + sql.SQL(" AND ").join(out) + sql.SQL(")")

    @staticmethod
    def _list(v: Any, where: str) -> list[Any]:
        if not isinstance(v, list) or not v:
            raise InvalidInput(f"{where}: must be a non-empty list")
        if len(v) > MAX_IN:
            raise InvalidInput(f"{where}: at most {MAX_IN} values")
        return v

    @staticmethod
    def _scalar(field: str, v: Any, where: str) -> Any:
        if field in TEXT_COLUMNS:
            if not isinstance(v, str):
                raise InvalidInput(f"{where}: {field} is compared with a string")
            return check_id(v, where)
        if field in NUMBER_COLUMNS:
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise InvalidInput(f"{where}: {field} is compared with a finite number")
            return float(v)
        return parse_time(v, where)

    def metadata(self, key: Any, value: Any, where: str) -> sql.Composable:
        if not isinstance(key, str) or not key or len(key) > METADATA_KEY_MAX_CHARS:
            raise InvalidInput(f"{where}: a metadata key is 1-{METADATA_KEY_MAX_CHARS} characters")
        check_id(key, where)
        out = []
        for op, v in self._ops(value, where):
            self._count(where)
            if op in SET_OPS:
                values = [self._meta_value(x, f"{where}.{op}") for x in self._list(v, f"{where}.{op}")]
                any_of = sql.SQL("(") + sql.SQL(" OR ").join(
                    sql.SQL("metadata @> {}").format(self.bind(Jsonb({key: x}))) for x in values) + sql.SQL(")")
                out.append(any_of if op == "in" else sql.SQL("NOT coalesce({}, false)").format(any_of))
            elif op in ("eq", "ne"):
                p = self.bind(Jsonb({key: self._meta_value(v, f"{where}.{op}")}))
                out.append(sql.SQL("metadata @> {}" if op == "eq" else "NOT coalesce(metadata @> {}, false)").format(p))
            else:
                x = self._meta_value(v, f"{where}.{op}")
                if isinstance(x, bool):
                    raise InvalidInput(f"{where}.{op}: compares numbers or strings (ISO dates), not booleans")
                out.append(sql.SQL("jsonb_path_exists(metadata -> {}::text, {}::jsonpath, {})").format(
                    self.bind(key), sql.Literal(_PATH[op]), self.bind(Jsonb({"v": x}))))
        return out[0] if len(out) == 1 else sql.SQL("(") + sql.SQL(" AND ").join(out) + sql.SQL(")")

    @staticmethod
    def _meta_value(v: Any, where: str) -> Any:
        if isinstance(v, str):
            return check_content(v, where)
        if isinstance(v, bool):
            return v
        if isinstance(v, int | float) and math.isfinite(v):
            return v
        raise InvalidInput(f"{where}: metadata values are strings, finite numbers or booleans")


def compile_filter(f: Any) -> tuple[sql.Composable, list[Any]]:
    """(a WHERE condition over memory_items, its parameters in order) for a filter; `true` for None."""
    if f is None:
        return TRUE, []
    c = _Compiler()
    return c.node(f, "filters", 1), c.params


def compile_filter_named(f: Any, prefix: str = "mf") -> tuple[sql.Composable, dict[str, Any]]:
    """compile_filter with named parameters (%(mf0)s, …), for a query that names its own (recall's)."""
    if f is None:
        return TRUE, {}
    c = _Compiler(prefix)
    return c.node(f, "filters", 1), c.params


def parse_filter_text(text: str | None) -> Any:
    """The `filters` query parameter: JSON text (an object), or None."""
    if text is None or not text.strip():
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"filters: not valid JSON ({exc})") from None


def parse_time(v: Any, where: str) -> datetime:
    if isinstance(v, datetime):
        t = v
    elif isinstance(v, str):
        try:
            t = datetime.fromisoformat(v.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise InvalidInput(f"{where}: not an ISO 8601 date-time (e.g. 2026-01-02T10:00:00+00:00)") from None
    else:
        raise InvalidInput(f"{where}: an ISO 8601 date-time string with a timezone")
    if t.tzinfo is None:
        raise InvalidInput(f"{where}: the date-time needs a timezone, e.g. 2026-01-02T10:00:00+00:00")
    return t


# -- the cursor ---------------------------------------------------------------------------------
# "<created_at in microseconds since the epoch>.<memory_id>" of the last row a page held: any text of
# this shape is a position in the (created_at, memory_id) order, so the pattern says exactly which
# cursors exist (callers treat it as opaque).
CURSOR_PATTERN = r"^[0-9]{1,16}\.[A-Za-z0-9_-]{1,200}$"
_CURSOR = re.compile(CURSOR_PATTERN)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def encode_cursor(created_at: datetime, memory_id: str) -> str:
    micros = (created_at - _EPOCH) // timedelta(microseconds=1)
    return f"{max(micros, 0)}.{memory_id}"


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """(created_at, memory_id) of a cursor; InvalidInput for text of another shape."""
    if not isinstance(cursor, str) or not _CURSOR.match(cursor):
        raise InvalidInput("cursor: not a cursor (pass `next_cursor` of the previous page as it is)")
    micros, memory_id = cursor.split(".", 1)
    return _EPOCH + timedelta(microseconds=int(micros)), memory_id
