"""The crash ledger alone (a file, no services): how marks left by dead processes narrow a batch
down to the record that kills, and when that record is given up on."""
from __future__ import annotations

from adapters.crash_ledger import CrashLedger

T = "ns.turns"


def batch(first: int, n: int, partition: int = 0):
    return [(T, partition, o) for o in range(first, first + n)]


def process_dies(path, unit) -> None:
    """A process that marks `unit` in flight and dies (the mark is never cleared)."""
    ledger = CrashLedger(path, limit=3).load()
    ledger.begin(unit)
    ledger.close()


def test_a_clean_run_leaves_nothing_suspect(tmp_path):
    path = tmp_path / "l.json"
    ledger = CrashLedger(path).load()
    ledger.begin(batch(0, 10))
    ledger.done()
    ledger.close()
    again = CrashLedger(path).load()
    assert again.units(batch(0, 10), lambda p: p) == [batch(0, 10)]
    assert not any(again.should_skip(p) for p in batch(0, 10))


def test_a_batch_in_flight_at_a_crash_is_taken_apart_and_only_that_batch(tmp_path):
    path = tmp_path / "l.json"
    process_dies(path, batch(100, 8))
    ledger = CrashLedger(path).load()
    # the same records come back, with others around them: one unit per suspect record, the
    # records before and after stay whole
    units = ledger.units(batch(96, 16), lambda p: p)
    assert units == [batch(96, 4)] + [[p] for p in batch(100, 8)] + [batch(108, 4)]
    # a batch that does not overlap it (other partition, later offsets) stays whole
    assert ledger.units(batch(100, 8, partition=1), lambda p: p) == [batch(100, 8, partition=1)]
    assert ledger.units(batch(200, 8), lambda p: p) == [batch(200, 8)]
    # one batch-level crash is not enough to give up on any of its records
    assert not any(ledger.should_skip(p) for p in batch(100, 8))


def test_a_large_batch_is_narrowed_in_chunks_first(tmp_path):
    """A projector's whole batch (2,000 records) in flight at a crash: chunks of 16, not 2,000
    transactions of one record; a chunk in flight at the next crash: single records."""
    from adapters.crash_ledger import CHUNK
    path = tmp_path / "l.json"
    process_dies(path, batch(0, 2000))
    ledger = CrashLedger(path).load()
    units = ledger.units(batch(0, 2000), lambda p: p)
    assert [len(u) for u in units] == [CHUNK] * (2000 // CHUNK)
    assert sum(units, []) == batch(0, 2000)
    process_dies(path, batch(320, CHUNK))
    ledger = CrashLedger(path).load()
    assert ledger.units(batch(0, 2000), lambda p: p) == [batch(0, 320)] + [[p] for p in batch(320, CHUNK)] + [batch(336, 1664)]
    assert not any(ledger.should_skip(p) for p in batch(320, CHUNK))


def test_the_record_that_kills_is_dead_lettered_after_the_limit_and_its_neighbours_are_not(tmp_path):
    path = tmp_path / "l.json"
    bad = (T, 0, 103)
    process_dies(path, batch(100, 8))          # crash 1: the batch
    for _ in range(2):                         # crashes 2 and 3: with the bad record alone in flight
        ledger = CrashLedger(path, limit=3).load()
        for pos in batch(100, 3):              # its neighbours before it go through
            assert not ledger.should_skip(pos)
            ledger.begin([pos])
            ledger.done()
        assert not ledger.should_skip(bad)
        ledger.begin([bad])                    # … and the process dies on it
        ledger.close()
    ledger = CrashLedger(path, limit=3).load()
    assert ledger.crashes(bad) == 3 and ledger.should_skip(bad)
    assert not ledger.should_skip((T, 0, 104))
    ledger.forget(bad)                         # dead-lettered and committed past
    assert not ledger.should_skip(bad)


def test_random_kills_do_not_add_up_to_a_skip(tmp_path):
    """An operator's kill -9 lands on whatever is in flight: different units each time, no skip."""
    path = tmp_path / "l.json"
    for first in (0, 50, 100, 150):
        ledger = CrashLedger(path, limit=3).load()
        for unit in ledger.units(batch(first, 10), lambda p: p):
            assert not any(ledger.should_skip(p) for p in unit)
        ledger.begin(batch(first, 10))
        ledger.close()
    ledger = CrashLedger(path, limit=3).load()
    assert max(ledger.crashes(p) for p in batch(0, 200)) == 1


def test_an_unreadable_mark_counts_as_no_mark(tmp_path):
    path = tmp_path / "l.json"
    path.write_bytes(b"{not json")
    ledger = CrashLedger(path).load()
    assert ledger.units(batch(0, 4), lambda p: p) == [batch(0, 4)]
