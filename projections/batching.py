"""Bigger write batches with the same result: group a batch's events by kind where order allows.

`runs_by_kind` (projections/runner.py) keeps log order by cutting a batch into runs of
consecutive same-kind events; memory events alternate (created, linked, created, reinforced…),
so its runs are one or two events long and every run costs a round trip. `grouped_runs` writes
each kind of a stretch of the batch as one run, in a fixed kind order, when that provably gives
the same result as log order:

- only the kinds of the grouping are grouped; any other kind (an erasure, a kind added later) is
  a barrier, applied where it stands, exactly as before;
- between barriers, the events are stably reordered by kind. A stable sort only swaps an event
  with a later one of a lower-ranked kind, so the result equals log order when every such pair
  either touches different memories (each event writes only its own memories' rows, nodes and
  the edges between them) or is of two kinds declared to commute on the same memory (e.g. in the
  graph a reinforcement sets node properties and a link adds an edge). A memory's creation never
  commutes: it must come first. Same-kind events keep their log order. If some pair breaks
  this, that stretch falls back to `runs_by_kind`.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from projections.memory_refs import memory_ids_of
from projections.runner import Item, runs_by_kind


def memory_refs(item: Item) -> list[str]:
    """The memories an event touches (the audit index's reading of its fields)."""
    return memory_ids_of(item.event)


def own_item_row(item: Item) -> list[str]:
    """The memory_items row an event writes (`data.memory_id`); none for memory.linked, which
    writes only memory_links."""
    return [] if item.event.data.TYPE == "memory.linked" else [item.event.data.memory_id]


@dataclass(frozen=True)
class Grouping:
    order: tuple[str, ...]                    # kinds grouped, in the order their runs are written
    commute: tuple[str, ...] = ()             # kinds whose events on the same memory commute pairwise
    refs: Callable[[Item], Iterable[str]] = memory_refs

    def commutes(self, a: str, b: str) -> bool:
        return a == b or (a in self.commute and b in self.commute)


def grouped_runs(items: list[Item], kind_of: Callable, grouping: Grouping) -> Iterator[tuple[str, list[Item]]]:
    rank = {k: n for n, k in enumerate(grouping.order)}
    stretch: list[tuple[str, Item]] = []
    barrier: list[Item] = []
    barrier_kind = None
    for item in items:
        kind = kind_of(item.event)
        if kind is None:
            continue
        if kind in rank:
            if barrier:
                yield barrier_kind, barrier
                barrier = []
            stretch.append((kind, item))
            continue
        if stretch:
            yield from _grouped(stretch, rank, grouping, kind_of)
            stretch = []
        if barrier and kind != barrier_kind:
            yield barrier_kind, barrier
            barrier = []
        barrier_kind = kind
        barrier.append(item)
    if barrier:
        yield barrier_kind, barrier
    if stretch:
        yield from _grouped(stretch, rank, grouping, kind_of)


def _grouped(stretch: list[tuple[str, Item]], rank: dict[str, int], grouping: Grouping,
             kind_of) -> Iterator[tuple[str, list[Item]]]:
    seen: dict[str, set[str]] = {}
    for kind, item in stretch:
        r = rank[kind]
        for ref in grouping.refs(item):
            kinds = seen.setdefault(ref, set())
            if any(rank[j] > r and not grouping.commutes(j, kind) for j in kinds):
                yield from runs_by_kind([i for _, i in stretch], kind_of)   # would reorder a dependency: log order
                return
            kinds.add(kind)
    by_kind: dict[str, list[Item]] = {}
    for kind, item in stretch:
        by_kind.setdefault(kind, []).append(item)
    for kind in sorted(by_kind, key=rank.__getitem__):
        yield kind, by_kind[kind]
