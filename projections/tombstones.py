"""Erasure tombstones in the read models: a projector never writes rows of an erased user again.

When a projector applies `user.erased` it records a tombstone (the user) in its own store, in the
same transaction as the deletion and its positions; from then on it refuses every later event of
that user. Crypto-shredding alone makes a later event unreadable once the key is gone everywhere,
but an event that still decodes — sealed and read with a key cached in some process when the
erasure happened, or a clear-only event (links, decay) — would otherwise re-create rows after the
user's rows were deleted. Tombstones are derived from the log (the erasure event), so a rebuild
recreates them and refuses the same events (law 1).

The laws cited here are defined in docs/concepts.md#laws.
"""
from __future__ import annotations

import logging

from projections.runner import Item

log = logging.getLogger("memstream.projector")

# One table per projector ({table}: e.g. memory_item_erasures), owned by it like its rows, so a
# rebuild's shadow swap (replay/stores.py OWNED_TABLES) moves the tombstones with the rows.
DDL = """
CREATE TABLE IF NOT EXISTS {s}.{table} (
    user_id    text PRIMARY KEY,
    event_id   text NOT NULL
);
"""


def refuse_erased(items: list[Item], tombstoned: set[str]) -> tuple[list[Item], list[Item], int]:
    """(items to apply, the user.erased items that add tombstones, how many were refused), in log order.

    Steps, in log order:
     1. a `user.erased` is always applied (its deletion is idempotent) and tombstones its user
        for everything after it — also later in this very batch;
     2. any other event of a tombstoned user is refused (counted by the caller);
     3. the rest is applied as before.
    """
    erased = set(tombstoned)
    kept: list[Item] = []
    new: list[Item] = []
    refused = 0
    for item in items:
        user = item.event.user
        if item.event.type == "user.erased":
            if user not in erased:
                new.append(item)
            erased.add(user)
            kept.append(item)
        elif user in erased:
            refused += 1
        else:
            kept.append(item)
    return kept, new, refused


def users_of(items: list[Item]) -> list[str]:
    return sorted({i.event.user for i in items})
