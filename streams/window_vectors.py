"""The recent window's vectors, one stored value each, written once (issue 31 item 2).

A user's state holds a window of `recent_window` memories (50 by default), each with its 384-d
embedding: ~77 KB of floats against ~3 KB of everything else. Stored inside the state value, the
whole window was sealed, written to RocksDB and sent through the changelog on **every** fact,
although a fact changes at most one or two of its vectors (a new memory enters, a merge moves
one). Here each vector is its own value in a third table, written when it enters the window or
changes, and read back through an in-process cache; the state value keeps, per window entry,
where its vector lies.

Layout:
- key `<user>\\x00v\\x00<slot>`; a user's slots are small integers below 2 × the window (see
  `save`), so an erasure pops them all without reading anything sealed (`drop`);
- value: sealed with the user's data key (label `vec:<user>:<slot>`): the vector's tag (8 bytes,
  big-endian), then its floats as little-endian float32;
- the tag is the user's own counter, carried in the state (`seq`): every vector written gets the
  next one, so (user, tag) names one vector for good. Decisions are a function of the log, so a
  worker that re-decides a fact from the same saved state writes the same vector under the same
  tag; the cache is keyed by it and checked against the stored tag on every read from the table.

Crash notes: a vector is written to a slot that neither the state as last saved nor the state
being saved references, before that state is saved; the slots it no longer references are popped
only after it is saved. A crash at any point leaves the saved state's slots as they were.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, MutableMapping

import numpy as np

from kernel.errors import MemstreamError

# (slot, tag, the array as loaded or last written): where the saved state keeps each window vector.
Ref = tuple[int, int, np.ndarray]


class WindowVectorMissing(MemstreamError):
    """A state names a window vector its table does not hold (or holds under another tag): the
    tables are not from the same moment; re-deciding from this state would be wrong."""


class WindowVectors:
    """The vector table of one processor, with a byte-bounded cache of unsealed vectors by user.

    `store` maps key → sealed value (a faust table live, a dict in a what-if); `codec` seals and
    opens as the processor's state codec does (streams/memory_core.py StateCodec)."""

    def __init__(self, store: MutableMapping[bytes, bytes], codec, max_slots: int, cache_bytes: int):
        self.store = store
        self.codec = codec
        self.max_slots = max_slots   # 2 × recent_window: the bound `save` keeps slots under
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[str, dict[int, np.ndarray]] = OrderedDict()   # user → tag → vector
        self._cached = 0   # bytes held

    @staticmethod
    def key(user: str, slot: int) -> bytes:
        return f"{user}\x00v\x00{slot}".encode()

    # -- cache ------------------------------------------------------------------------------

    def _remember(self, user: str, tag: int, vec: np.ndarray) -> None:
        if self.cache_bytes <= 0:
            return
        held = self._cache.get(user)
        if held is None:
            held = self._cache[user] = {}
        else:
            self._cache.move_to_end(user)
        if tag not in held:
            held[tag] = vec
            self._cached += vec.nbytes
        while self._cached > self.cache_bytes and len(self._cache) > 1:
            _, gone = self._cache.popitem(last=False)
            self._cached -= sum(v.nbytes for v in gone.values())

    def _forget_tags(self, user: str, tags: Iterable[int]) -> None:
        held = self._cache.get(user)
        if held is None:
            return
        for tag in tags:
            vec = held.pop(tag, None)
            if vec is not None:
                self._cached -= vec.nbytes

    def forget_cached(self, user: str | None = None) -> None:
        """Drop a user's cached vectors (erased, forgotten), or everyone's (partitions revoked:
        another worker may decide for them meanwhile)."""
        if user is None:
            self._cache.clear()
            self._cached = 0
            return
        gone = self._cache.pop(user, None)
        if gone:
            self._cached -= sum(v.nbytes for v in gone.values())

    # -- read and write ---------------------------------------------------------------------

    def load(self, user: str, where: list[list[int]], dims: list[int]) -> list[Ref]:
        """The window's vectors, in window order: `where` is each entry's [slot, tag] as the state
        saved it, `dims` each one's dimension."""
        held = self._cache.get(user)
        if held is not None:
            self._cache.move_to_end(user)
        out: list[Ref] = []
        for (slot, tag), dim in zip(where, dims, strict=True):
            vec = None if held is None else held.get(tag)
            if vec is None:
                vec = self._read(user, slot, tag, dim)
                self._remember(user, tag, vec)
            out.append((slot, tag, vec))
        return out

    def _read(self, user: str, slot: int, tag: int, dim: int) -> np.ndarray:
        blob = self.store.get(self.key(user, slot))
        opened = None if blob is None else self.codec.load(user, f"vec:{user}:{slot}", blob)
        if opened is None or len(opened) != 8 + 4 * dim or int.from_bytes(opened[:8], "big") != tag:
            raise WindowVectorMissing(f"window vector {tag} of user {user!r} is not in slot {slot}")
        # read-only: the window's arrays are shared with the cache; the rules replace a vector, never edit it
        return np.frombuffer(opened, dtype="<f4", offset=8)

    def save(self, user: str, old: dict[str, Ref], window: list[tuple[str, np.ndarray]],
             seq: int) -> tuple[dict[str, Ref], int]:
        """Store the vectors of `window` (memory id, vector) that `old` (memory id → Ref, as the
        saved state has them) does not already hold; returns the new refs (whose arrays the
        caller puts back in its window: they are now read-only) and the next tag.

        1. An entry whose array is the very one loaded or last written is unchanged (the rules
           replace a vector when they change it, never edit it in place): nothing written.
        2. Any other goes to the lowest slot referenced by neither the saved state nor the new
           refs (a crash before the state is saved leaves the saved one whole); at most
           len(old) + len(window) slots are ever in use, so slots stay below `max_slots`.
        """
        refs: dict[str, Ref] = {}
        taken = {slot for slot, _, _ in old.values()}
        free = 0
        for mid, vec in window:
            prev = old.get(mid)
            if prev is not None and prev[2] is vec:
                refs[mid] = prev
                taken.add(prev[0])
        for mid, vec in window:
            if mid in refs:
                continue
            while free in taken:
                free += 1
            slot, tag, free = free, seq, free + 1
            seq += 1
            stored = vec if vec.dtype == np.dtype("<f4") and vec.flags.c_contiguous else np.ascontiguousarray(vec, dtype="<f4")
            stored.flags.writeable = False   # shared with the cache from now on, like a loaded one
            self.store[self.key(user, slot)] = self.codec.dump(user, f"vec:{user}:{slot}",
                                                               tag.to_bytes(8, "big") + stored.tobytes())
            self._remember(user, tag, stored)
            refs[mid] = (slot, tag, stored)
        return refs, seq

    def release(self, user: str, old: dict[str, Ref], new: dict[str, Ref]) -> None:
        """After the new state is saved: pop the slots only the old one referenced."""
        keep = {slot for slot, _, _ in new.values()}
        gone = [(slot, tag) for slot, tag, _ in old.values() if slot not in keep]
        for slot, _ in gone:
            self.store.pop(self.key(user, slot), None)
        live = {tag for _, tag, _ in new.values()}
        self._forget_tags(user, (tag for _, tag in gone if tag not in live))

    def drop(self, user: str) -> None:
        """Every slot a user can hold (erasure, forgetting): nothing sealed is read to find them."""
        for slot in range(self.max_slots):
            self.store.pop(self.key(user, slot), None)
        self.forget_cached(user)
