"""Replay's batching without services (projections/batching.py, runner.py): grouped runs give the
result of log order. Rebuilds against the real stores: tests/test_replay.py."""
from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from projections.batching import Grouping, grouped_runs
from projections.runner import Item, kind_by_type, runs_by_kind
from schemas.envelope import Envelope


@pytest.mark.parametrize("commute", [(), ("link",), ("reinforce", "supersede", "link")])
def test_grouped_runs_give_the_result_of_log_order(commute):
    """A toy store where order matters exactly as in the projectors: grouping by kind must
    never change the result (and must fall back when it would)."""
    rng = random.Random(5)
    kinds = {"c": "create", "r": "reinforce", "s": "supersede", "l": "link", "e": "erase"}

    def apply(state, kind, run):
        for i in run:
            d = i.event.data
            if kind == "create":
                state.setdefault(d["memory_id"], {"n": 0})
            elif kind == "erase":
                state.clear()
            elif d["memory_id"] in state:
                state[d["memory_id"]][kind] = d["v"]          # absolute, last wins
                state[d["memory_id"]]["n"] += 1 if kind == "reinforce" else 0
    for _ in range(300):
        items = []
        for n in range(rng.randint(1, 30)):
            t = rng.choice("ccrrsle" if rng.random() < 0.9 else "crsl")
            mid = f"m{rng.randint(0, 6)}"
            env = Envelope(str(n), t, 1, "u", datetime.now(UTC), None, None, "t", {"memory_id": mid, "v": n}, 1)
            items.append(Item("x", 0, n, env))
        kind_of = kind_by_type({**{k: v for k, v in kinds.items()}})
        grouping = Grouping(("create", "reinforce", "supersede", "link"), commute=commute,
                            refs=lambda i: [i.event.data["memory_id"]])
        a, b = {}, {}
        for kind, run in runs_by_kind(items, kind_of):
            apply(a, kind, run)
        for kind, run in grouped_runs(items, kind_of, grouping):
            apply(b, kind, run)
        assert a == b
