"""streams/faust_adapter.py's offset guard on faust's own Consumer bookkeeping (no broker needed: the consumer is
built but never started). The fault suite's skipped-record test runs it against Kafka."""
from __future__ import annotations

import faust
from faust.types import TP

from streams import faust_adapter as offset_guard
from streams.faust_adapter import OffsetHealer, head_hole, tail_hole

TP0 = TP("t.facts", 0)


def test_head_hole_is_the_unacked_offsets_before_the_first_ack():
    never = lambda o: False  # noqa: E731
    assert head_hole([38, 39, 40], 37, never) == (37, 38)       # one unacked at the head (faust#606)
    assert head_hole([40, 41], 37, never) == (37, 40)
    assert head_hole([37, 38], 37, never) is None                # acks start at the committed offset
    assert head_hole([38], 37, lambda o: o == 37) is None        # a registered gap (compacted away)
    assert head_hole([], 37, never) is None
    assert head_hole([5], None, never) is None                   # nothing committed yet: unknown
    assert head_hole([1, 2], 0, never) == (0, 1)                 # 0 is a committed offset too


def consumer():
    app = faust.App("offset-guard-test", broker="kafka://127.0.0.1:1", web_enabled=False)
    return app, app.consumer


def test_no_commit_over_an_unacked_head_offset():
    offset_guard.install()
    _, c = consumer()
    c._committed_offset[TP0] = 37
    c._acked[TP0].extend([38, 39, 40])
    assert c._new_offset(TP0) is None, "faust alone returns 41 here, committing over offset 37"
    c._acked[TP0].append(37)
    assert c._new_offset(TP0) == 41
    # faust's own gap handling (offsets that do not exist) still commits through
    c._committed_offset[TP0] = 41
    c._gap[TP0].addi(41, 43)
    c._acked[TP0].extend([43, 44])
    assert c._new_offset(TP0) == 45


def test_install_is_idempotent():
    offset_guard.install()
    patched = faust.transport.consumer.Consumer._new_offset
    offset_guard.install()
    assert faust.transport.consumer.Consumer._new_offset is patched


class InFlight:
    def __init__(self, tp, offset):
        self.tp, self.offset, self.acked = tp, offset, False

    def __hash__(self):
        return hash((self.tp, self.offset))


def test_a_hole_is_a_suspect_only_when_nothing_in_flight_explains_it():
    _, c = consumer()
    healer = OffsetHealer("test", "127.0.0.1:1")
    c._committed_offset[TP0] = 37
    c._acked[TP0].extend([38, 39])
    assert healer.holes(c) == {TP0: (37, 38)}
    slow = InFlight(TP0, 37)          # record 37 is still being processed (a retry, a slow step)
    c._unacked_messages.add(slow)
    assert healer.holes(c) == {}


def test_offsets_taken_off_for_a_commit_in_progress_are_not_a_hole():
    """faust removes a commit's acks from its list before flushing its producer and sets the committed
    offset only after: under load, for seconds. The healer read that window as a hole and re-read
    the first records of every partition at start-up (duplicate decisions on the memory topic)."""
    offset_guard.install()
    _, c = consumer()
    healer = OffsetHealer("test", "127.0.0.1:1")
    c._committed_offset[TP0] = 37
    c._acked[TP0].extend(range(37, 59))
    assert c._new_offset(TP0) == 59          # the commit of 37..58 starts
    c._acked[TP0].extend([59, 60])           # the stream goes on while the producer flushes
    assert c._committed_offset[TP0] == 37 and healer.holes(c) == {}
    c._acked[TP0][:] = [61, 62]              # 59 and 60 skipped: a hole after the commit is still one
    assert healer.holes(c) == {TP0: (59, 61)}
    c._committed_offset[TP0] = 59            # the commit ended
    assert healer.holes(c) == {TP0: (59, 61)}


def test_a_commit_that_never_ends_calls_on_stall():
    """faust flushes its producer before committing; a batch stuck without a partition leader held
    a CI run's memory worker for 1,003 s. The check exits (on_stall) once the commit outlives the
    limit, and leaves a commit in its limit alone."""
    import asyncio
    import time

    app, c = consumer()
    stalls = []
    healer = OffsetHealer("test", "127.0.0.1:1", commit_stall_s=60.0, on_stall=stalls.append)
    c._memstream_commit_started = time.monotonic() - 10
    asyncio.run(healer.check(app))
    assert stalls == []
    c._memstream_commit_started = time.monotonic() - 61
    asyncio.run(healer.check(app))
    assert len(stalls) == 1 and stalls[0] > 60


def test_tail_hole_is_what_was_delivered_past_the_committed_offset_with_no_ack():
    never = lambda o: False  # noqa: E731
    assert tail_hole(39, 37, 40, never) == (37, 40)      # 37..39 delivered, the queue cleared on a resume
    assert tail_hole(37, 37, 38, never) == (37, 38)      # just one record
    assert tail_hole(36, 37, 40, never) is None          # all delivered records are committed
    assert tail_hole(37, 37, 37, never) is None          # just after a seek, nothing to read yet
    assert tail_hole(None, 37, 40, never) is None        # nothing delivered since the assignment
    assert tail_hole(39, 37, None, never) is None        # no fetch response yet: the log end unknown
    assert tail_hole(39, 37, 40, lambda o: o == 37) is None


def test_a_partition_with_no_acks_is_judged_only_when_nothing_waits_in_the_queues():
    app, c = consumer()
    app.topics._acking_topics.add(TP0.topic)
    c.highwater = lambda tp: 40
    healer = OffsetHealer("test", "127.0.0.1:1")
    c._committed_offset[TP0] = 37
    c._read_offset[TP0] = 39
    assert healer.holes(c) == {TP0: (37, 40)}
    assert healer.holes(c, queued=3) == {}               # delivered, still waiting for the stream
    c._paused_partitions.add(TP0)
    assert healer.holes(c) == {}                         # faust holds the partition back (recovery)


def test_nothing_committed_yet_means_the_log_start_not_anything_goes():
    """faust keeps None for a partition never committed (and for one committed at 0) and then
    commits the first run of acks wherever it starts: records skipped at the start of a
    partition's life were committed past. The guard reads the log start instead, and commits
    nothing until it knows it."""
    offset_guard.install()
    _, c = consumer()
    c._acked[TP0].extend([3, 4])
    assert c._committed_offset[TP0] is None
    assert c._new_offset(TP0) is None, "log start unknown: no commit yet"
    c._memstream_log_start = {TP0: 0}
    assert c._new_offset(TP0) is None, "faust alone returns 5 here, committing over offsets 0-2"
    healer = OffsetHealer("test", "127.0.0.1:1")
    assert healer.holes(c) == {TP0: (0, 3)}
    c._acked[TP0].extend([0, 1, 2])
    assert c._new_offset(TP0) == 5
