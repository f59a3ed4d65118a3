"""Which memories an event names: the audit index's reading of event fields, also used to group
projector batches by the memories they touch (projections/batching.py). Pure; no I/O."""
from __future__ import annotations

from collections.abc import Mapping

from schemas.envelope import Envelope

# Fields that name a memory, in any event type, present or future (memory.linked: from_id/to_id).
_MEMORY_REF = ("memory_id", "superseded_by", "from_id", "to_id", "merged_into", "into_id", "retired_id")
_MEMORY_REFS = ("memory_ids", "merged_ids", "source_ids", "parent_ids")


def memory_ids_of(envelope: Envelope) -> list[str]:
    """The memory ids an event concerns, in field order, without duplicates. Pure; never raises.

    memory.* and preference.set: their memory ids; fact.extracted: its fact_id (the memory-to-be).
    Unknown types are read by field name, so a new event type is indexed without a code change.
    """
    data = envelope.data
    if data is None:
        return []
    fields = data if isinstance(data, Mapping) else getattr(data, "__dict__", {})
    found: list = []
    if envelope.type.startswith("fact."):
        found.append(fields.get("fact_id"))
    for name, value in fields.items():
        if name in _MEMORY_REF or name.endswith("_memory_id"):
            found.append(value)
        elif (name in _MEMORY_REFS or name.endswith("_memory_ids")) and isinstance(value, (list, tuple)):
            found.extend(value)
    return list(dict.fromkeys(str(v) for v in found if isinstance(v, (str, int)) and str(v)))
