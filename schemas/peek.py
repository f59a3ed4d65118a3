"""Peeking at a record without decoding it: the one place that reads a raw record's clear envelope.

Decoding (schemas/records.py) checks the envelope, verifies control events and unseals personal
content: right before acting on an event. Routing, metrics and what-if's signatures only need to
know what kind of record it is, for every record read, so they peek:

- `peek_type`: the event type, bounded and cheap. The encoder writes `"type":"…"` second, right
  after the id, so it is found in the first bytes without parsing; a record written another way
  (by hand, a poison record) falls back to a full parse.
- `peek`: the clear envelope as a dict (sealed fields stay sealed), {} when the record is not a
  JSON object.

What a peek returns is never trusted to act on: it says only which records to decode.
"""
from __future__ import annotations

from typing import Any

import orjson

_TYPE = b'"type":"'


def peek(raw: bytes | None) -> dict[str, Any]:
    """The record's clear envelope as a dict; {} for an empty record or one that is not a JSON object."""
    try:
        record = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        return {}
    return record if isinstance(record, dict) else {}


def peek_type(raw: bytes | None) -> str | None:
    """The record's event type, or None where it has none (empty, not JSON, no string `type`)."""
    if not raw:
        return None
    i = raw.find(_TYPE, 0, 200)
    if i >= 0:
        j = raw.find(b'"', i + len(_TYPE), i + len(_TYPE) + 80)
        if j > 0:
            return raw[i + len(_TYPE):j].decode("utf-8", "replace")
    kind = peek(raw).get("type")
    return kind if isinstance(kind, str) else None
