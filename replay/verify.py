"""`memstream replay verify`: rebuild into throw-away shadows, compare with the live projections.

Law 1 says every projection equals a replay of the log. Verify checks it, projection by
projection: a fresh shadow (`<ns>__verify`, graph generation `<ns>__verify`) is built up to the
live projection's own positions, then, with the live writers held for a moment, caught up to
exactly the live positions and compared by content checksum (Projector.checksum()). Both sides
have then applied the same records, so any difference is a real one; the first differing rows
are shown (replay/diff.py). The shadow is dropped afterwards unless `keep`.

The laws cited here are defined in docs/concepts.md#laws.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import psycopg

from kernel.config import Settings
from adapters.kafka_auth import ADMIN, kafka_config
from projections import graph_generation, pg
from replay import stores
from replay.diff import diff_graph, diff_table
from replay.engine import Replayer, ReplayStats, real_positions, topics_of
from replay.progress import note
from replay.rebuild import drop_shadow, make_projector, replay_lock, resolve_names


@dataclass
class ProjectionCheck:
    name: str
    live: str
    shadow: str
    equal: bool
    positions: dict = field(default_factory=dict)
    diffs: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"projection": self.name, "equal": self.equal, "live": self.live, "shadow": self.shadow,
                "positions": {f"{t}:{p}": o for (t, p), o in sorted(self.positions.items())}, "diffs": self.diffs}


@dataclass
class VerifyReport:
    namespace: str
    checks: list[ProjectionCheck]
    load: ReplayStats
    catchup: ReplayStats

    @property
    def ok(self) -> bool:
        return all(c.equal for c in self.checks)

    @property
    def rules_profiles(self) -> dict[str, int]:
        """Decisions replayed, by the rules profile they were made under (replay/engine.py)."""
        out = dict(self.load.rules_profiles)
        for made_under, n in self.catchup.rules_profiles.items():
            out[made_under] = out.get(made_under, 0) + n
        return out

    def as_dict(self) -> dict:
        return {"namespace": self.namespace, "ok": self.ok, "projections": [c.as_dict() for c in self.checks],
                "rules_profiles": self.rules_profiles, "load": self.load.as_dict(), "catchup": self.catchup.as_dict()}


def _live_positions(settings: Settings, names: list[str]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
        for n in names:
            if not stores.is_graph(n):
                out[n] = stores.load_pg_positions(conn, settings.namespace, n)
    if any(stores.is_graph(n) for n in names):
        with stores.graph_driver(settings) as driver, driver.session() as s:
            out[stores.GRAPH] = stores.graph_positions(s, graph_generation.current(s, settings.namespace))
    return out


def verify(settings: Settings, projection: str | list[str] = "all", *, keys=None, progress: bool = True,
           rows: int = 5, keep: bool = False, batch_size: int = 5000) -> VerifyReport:
    names = resolve_names(projection)
    own_keys = keys is None
    if own_keys:
        from adapters.privacy.keystore import KeyStore
        keys = KeyStore(settings)
    shadow = stores.shadow_settings(settings, "verify")
    generation = shadow.namespace
    projectors = []
    try:
        with replay_lock(settings, "verify"):
            drop_shadow(settings, shadow, names, generation if stores.GRAPH in names else None)
            projectors = [make_projector(n, shadow, generation) for n in names]
            for p in projectors:
                p.setup()
                if not stores.is_graph(p.name):
                    stores.defer_indexes(shadow, stores.owned_tables(p))   # content only: never built
            # 1. up to where the live projections are now (without holding them)
            first = _live_positions(settings, names)
            load = Replayer(kafka_config(settings, ADMIN), keys, max_future_skew_s=settings.max_future_skew_s, batch_size=batch_size, progress=progress,
                            progress_label="verify").run(projectors, {n: real_positions(first[n], topics_of(p))
                                                                      for n, p in zip(names, projectors)})
            for n in names:   # a dropped live store compares as empty (tables created outside the locks)
                live = make_projector(n, settings)
                live.setup()
                live.close()
            # 2. exactly where they are, with their writers held, then compare
            checks = []
            t = time.monotonic()
            note("holding the live writers: catching up to their positions, then comparing checksums…", progress)
            with stores.WriterLocks(settings, names) as locks:
                until = {p.name: real_positions(locks.positions.get(p.name, {}), topics_of(p)) for p in projectors}
                catchup = Replayer(kafka_config(settings, ADMIN), keys, max_future_skew_s=settings.max_future_skew_s, batch_size=batch_size, progress=False).run(projectors, until)
                for p in projectors:
                    checks.append(_compare(settings, shadow, p, until[p.name], locks, rows))
            note(f"compared {len(checks)} projection(s) in {time.monotonic() - t:.1f}s; dropping the shadow…", progress)
            return VerifyReport(settings.namespace, checks, load, catchup)
    finally:
        for p in projectors:
            p.close()
        if not keep:   # throw-away: the whole schema (set-up creates tables of other projections too)
            stores.drop_schema(settings, shadow.namespace)
            if stores.GRAPH in names:
                with stores.graph_driver(settings) as driver:
                    stores.delete_generation(driver, generation)
        if own_keys:
            keys.close()


def _compare(settings: Settings, shadow: Settings, p, positions: dict, locks: stores.WriterLocks, rows: int) -> ProjectionCheck:
    # The live projector's connections only, no setup(): its DDL must not queue behind the held writers.
    live = make_projector(p.name, settings)
    if stores.is_graph(p.name):
        live.driver = stores.graph_driver(settings)
    else:
        live.conn = pg.connect(settings)
    try:
        a, b = live.checksum(), p.checksum()
        check = ProjectionCheck(p.name, a, b, a == b, positions)
        got = real_positions(p.positions(), topics_of(p))
        if {tp: o for tp, o in got.items() if o} != {tp: o for tp, o in positions.items() if o}:
            check.equal = False
            check.diffs.append({"positions": {"live": {f"{t}:{q}": o for (t, q), o in positions.items()},
                                              "shadow": {f"{t}:{q}": o for (t, q), o in got.items()}}})
        if not check.equal:
            if stores.is_graph(p.name):
                check.diffs += diff_graph(live.driver, locks.live_generation or settings.namespace, p.ns, rows)
            else:
                with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
                    for table, (columns, key) in sorted(p.CHECKSUM.items()):
                        for d in diff_table(conn, settings.namespace, shadow.namespace, table, columns, key, rows):
                            check.diffs.append({"table": table, **d})
        return check
    finally:
        live.close()
