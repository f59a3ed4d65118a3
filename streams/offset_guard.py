"""At-least-once on faust's offset bookkeeping (faust-streaming 0.15.x): no commit over a record
that was never processed, and such a record re-read instead of lost.

Two faust defects together lost one fact in a kill -9 fault run (facts:1:37 was never decided,
and the memory group's committed offset stood past it):
1. faust#596: around a rebalance and table recovery a fetched record can be skipped by the
   stream (a stale generation id, queues cleared on resume, a fetch batch cut short) while the
   later records of its partition are processed and acked; nothing re-reads it.
2. faust#606: `Consumer._new_offset` commits over one unacked offset at the head of the acks
   (`min(acked) - committed > 1`, an off-by-one: `committed` is the next offset to read), so the
   skipped record is committed past. A hole of two or more blocks that partition's commits until
   the worker restarts — and a long uncommitted tail is re-read past the memory processor's
   applied window.

`install()` fixes 2: a partition whose acks do not start at its committed offset is not committed
(faust's registered gaps, offsets that do not exist in a compacted log, still count as acked).
`OffsetHealer` turns 1 from a stall into a re-read: a hole at the head of a partition's acks that
no in-flight record explains, seen on two consecutive checks, is re-read from the committed offset
(a seek). Re-read records are processed again, which every stage absorbs (derived ids, the memory
processor's applied window); a healed record is processed after later ones of its partition.
"""
from __future__ import annotations

import logging

from faust.transport.consumer import Consumer

log = logging.getLogger("memstream.offsets")


def head_hole(acked: list[int], committed: int | None, gap_covers) -> tuple[int, int] | None:
    """The unacked offsets [committed, first acked) at the head of a partition's acks, or None.

    `committed` is the next offset to read (None: unknown, nothing committed yet); `gap_covers(o)`
    says whether faust registered offset o as a gap (a record that does not exist)."""
    if not acked or committed is None:
        return None
    head = min(acked)
    if head <= committed or gap_covers(committed):
        return None
    return committed, head


def install() -> None:
    """Patch Consumer._new_offset once (idempotent): never commit over an unacked head."""
    if getattr(Consumer._new_offset, "memstream_guarded", False):
        return
    original = Consumer._new_offset

    def _new_offset(self, tp):
        gaps = self._gap[tp]
        if head_hole(self._acked[tp], self._committed_offset[tp], lambda o: bool(gaps.at(o))) is not None:
            return None
        return original(self, tp)

    _new_offset.memstream_guarded = True
    Consumer._new_offset = _new_offset


class OffsetHealer:
    """Finds partitions whose acks start past their committed offset with nothing in flight there
    (records faust skipped) and seeks them back, so the skipped records are read again."""

    def __init__(self, component: str):
        self.component = component
        self.suspects: dict = {}
        self.healed = 0

    def holes(self, consumer) -> dict:
        in_flight = {(m.tp, m.offset) for m in list(consumer._unacked_messages) if not m.acked}
        out = {}
        for tp, acked in list(consumer._acked.items()):
            gaps = consumer._gap[tp]
            hole = head_hole(list(acked), consumer._committed_offset.get(tp), lambda o, g=gaps: bool(g.at(o)))
            if hole is not None and not any((tp, o) in in_flight for o in range(*hole)):
                out[tp] = hole
        return out

    async def check(self, app) -> int:
        """One check; returns the partitions re-read. Nothing is judged across a rebalance."""
        if app.rebalancing or not app.flow_control.is_active():
            self.suspects = {}
            return 0
        consumer = app.consumer
        holes = self.holes(consumer)
        healed = 0
        for tp, hole in holes.items():
            if self.suspects.get(tp) == hole:
                log.warning("%s: offsets %d..%d of %s:%d were skipped by the stream and never processed "
                            "(faust#596); re-reading from %d", self.component, hole[0], hole[1] - 1,
                            tp.topic, tp.partition, hole[0])
                await consumer.seek(tp, hole[0])
                healed += 1
        self.suspects = {tp: h for tp, h in holes.items() if self.suspects.get(tp) != h}
        self.healed += healed
        return healed


def attach(app, component: str, every: float = 2.0) -> OffsetHealer:
    """Guard an app's commits and heal skipped records every `every` seconds."""
    install()
    healer = OffsetHealer(component)

    @app.timer(every)
    async def heal_skipped_offsets() -> None:
        await healer.check(app)

    return healer
