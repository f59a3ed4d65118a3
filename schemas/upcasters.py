"""Upcasters: turn an old version's data into the next version's, on read. The log is never rewritten.

Each upcaster is a pure function of the (already unsealed) data dict. `upcast` chains them
until the latest version, so a v1 event reads as v3 once v2→v3 exists too.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
UPCASTERS: dict[tuple[str, int], Upcaster] = {}


def upcaster(event_type: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    def register(fn: Upcaster) -> Upcaster:
        UPCASTERS[(event_type, from_version)] = fn
        return fn
    return register


@upcaster("turn.recorded", 1)
def _turn_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    # v2 renamed `text` to `content` and added the optional `task` the turn belongs to.
    out = {k: v for k, v in data.items() if k != "text"}
    out["content"] = data["text"]
    out.setdefault("task", None)
    return out


def upcast(event_type: str, version: int, data: dict[str, Any], latest: int) -> dict[str, Any]:
    while version < latest:
        step = UPCASTERS.get((event_type, version))
        if step is None:
            raise KeyError(f"no upcaster for {event_type} v{version}")
        data = step(data)
        version += 1
    return data
