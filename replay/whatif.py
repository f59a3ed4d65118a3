"""What-if: re-derive memory decisions from the facts with other settings, and compare.

`memstream replay whatif --name NAME --set dedup_threshold=0.9 --set decay_rate=0.99 …`

1. Settings with the overrides (validated like the environment variables they stand for) give
   the memory rules (domain.memory_rules.Rules.from_settings).
2. The live log's facts topic, and the memory processor's inputs on the memory topic (erasures,
   forgetting, recalls, decay ticks), are read partition by partition in append order (the
   two topics merged by record timestamp, as the live processor met them) and fed to the live
   processor's own core (streams/memory_core.py, MemoryCore) with its state in dicts. No
   embedder, no LLM: facts carry their embeddings.
3. The decisions, with the ids the processor would give them, and the inputs the projections need
   (erasures, forgetting, recalls) go to their own topic `<ns>.whatif-<NAME>.memory`, sealed
   with the users' own data keys (erasing a user makes their what-if content unreadable too).
4. That topic is projected into shadow read models (Postgres schema `<ns>__whatif_<NAME>`, graph
   generation of the same name): key-value preferences, pgvector items, the graph. Query them
   with MEMSTREAM_NAMESPACE=<ns>__whatif_<NAME> MEMSTREAM_LOG_NAMESPACE=<ns>.whatif-<NAME>.
5. The report: decisions by type, live vs what-if; how many facts (and ticks) were decided
   differently, with examples; memory items by status and preferences, live vs what-if; the
   rules profile the what-if decided under (domain/rules_profile.py), and the profiles
   the live decisions it compares against were made under, with the settings where they differ
   (from the log's rules.adopted events). The what-if's own decisions carry its profile's hash.
With no overrides the what-if reproduces the live decisions exactly (same ids, same values): a
check that the re-derivation is faithful, which the tests make.
"""
from __future__ import annotations

import hashlib
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field

import orjson
import psycopg
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from psycopg import sql

from kernel import watermarks
from adapters.bus import LogReader, producer_config
from kernel.config import InvalidValue, Settings
from domain.memory_state import Rules
from domain.rules_profile import differences, profile_hash, profile_of
from kernel.errors import ConfigError, InvalidEvent, MemstreamError
from adapters.kafka_auth import ADMIN, kafka_config
from adapters.privacy.keystore import KeyStore
from adapters.resilience import Backoff
from replay import stores
from replay.audit import _rows, summary
from schemas.peek import peek
from replay.fetch import fetch
from replay.rebuild import drop_shadow, make_projector
from replay.engine import UNRECORDED, Replayer, reader
from replay.progress import Progress, note
from schemas.codec import decode, encode
from schemas.records import confluent_appended_ms, decode_confluent
from streams.memory_core import MemoryCore, PlainStates
from streams.routing import memory_input, partitioner

PRODUCER = "whatif/1"
# What the memory processor decides (counted and compared); everything else on the topic is input.
DECISIONS = ("memory.created", "memory.reinforced", "memory.linked", "memory.superseded", "preference.set",
             "memory.merged", "memory.deduped", "memory.decayed", "memory.expired", "memory.summarized",
             "memory.revived", "entity.observed", "relation.asserted", "relation.ended")
# memory.decayed for time alone (_time_only): counted under this name, not compared
TIME_ONLY = "memory.decayed (time)"
# Inputs of the processor that the projections need too: copied to the what-if topic.
PASS_THROUGH = ("user.erased", "memory.recalled", "memory.forgotten", "user.forgotten")
# pg-relations: a what-if's shadow answers entity and relation queries too (#26), as neo4j-graph draws them
WHATIF_PROJECTORS = ("kv-preferences", "pgvector-items", "neo4j-graph", "pg-relations")


def parse_overrides(settings: Settings, pairs: list[str] | dict) -> tuple[Settings, dict]:
    """`key=value` pairs (or a dict) → (settings with them, the validated values)."""
    items = pairs.items() if isinstance(pairs, dict) else [p.partition("=")[::2] for p in pairs]
    values = {}
    for key, raw in items:
        key = key.strip().lower().removeprefix("memstream_")
        field_info = Settings.model_fields.get(key)
        if field_info is None or key in ("namespace", "log_namespace_override"):
            raise ConfigError(f"--set {key}: not a setting (see `memstream config`)")
        try:
            values[key] = Settings.coerce_setting(key, raw)
        except InvalidValue as exc:
            raise ConfigError(f"--set {key}={raw}: {exc}") from None
    return settings.model_copy(update=values), values


def whatif_names(settings: Settings, name: str) -> tuple[str, Settings]:
    """(the what-if's log namespace, the settings of its shadow read models)."""
    if not stores.SHADOW_RE.match(name):
        raise MemstreamError(f"what-if name {name!r}: use lower-case letters, digits and _")
    log_ns = f"{settings.log_namespace}.whatif-{name}"
    shadow = settings.model_copy(update={"namespace": f"{settings.namespace}__whatif_{name}",
                                         "log_namespace_override": log_ns})
    return log_ns, shadow


def _fresh_topic(settings: Settings, topic: str, timeout: float = 60.0) -> None:
    """Delete and re-create the what-if topic: it is derived, a re-run starts it over."""
    admin = AdminClient(kafka_config(settings, ADMIN))
    if topic in admin.list_topics(timeout=10).topics:
        for fut in admin.delete_topics([topic], operation_timeout=30).values():
            fut.result()
    deadline = time.monotonic() + timeout
    retry = Backoff(base=0.2, cap=1.0)
    config = {"retention.ms": "-1", "retention.bytes": "-1"}
    while True:
        try:
            new = NewTopic(topic, num_partitions=settings.partitions,
                           replication_factor=settings.kafka_replication_factor, config=config)
            for fut in admin.create_topics([new], operation_timeout=30).values():
                fut.result()
            break
        except Exception as exc:   # marked for deletion a moment longer
            if time.monotonic() > deadline:
                raise MemstreamError(f"cannot re-create {topic}: {exc}") from None
            retry.sleep()
    with reader(kafka_config(settings, ADMIN), "whatif-probe") as r:
        retry.reset()
        while time.monotonic() < deadline:
            try:
                if len(r.ends({topic})) == settings.partitions:
                    return
            except Exception:
                pass
            retry.sleep()


# -- the memory processor, in memory ------------------------------------------------------------

def in_memory_core(settings: Settings, rules: Rules, keys) -> MemoryCore:
    """The live processor's core (streams/memory_core.py) with its state tables as dicts of
    unsealed values: the state lives only as long as this what-if."""
    return MemoryCore(settings, rules, keys, states={}, ledgers={}, codec=PlainStates(),
                      partition_of=partitioner(settings.partitions))


def _time_only(record: dict) -> bool:
    """A `memory.decayed` that says only that time passed (reason "decay"). Workers before decay
    became a function (domain/decay.py) published one per step of decay_min_change; now a reader
    computes it, and the worker publishes one only to correct a reader's value. Neither is a
    decision to compare: a log from before the change and a what-if after it differ in exactly
    these, and each side's count is reported apart."""
    return record.get("type") == "memory.decayed" and (record.get("data") or {}).get("reason") == "decay"


def _signature(record: dict) -> str:
    """What a decision says, from its clear fields: compared between live and what-if. Not which
    rules profile made it (reported apart): that differs whenever the settings do."""
    data = {k: v for k, v in (record.get("data") or {}).items() if k != "rules_profile"}
    return record.get("id", "") + ":" + record.get("type", "") + ":" + hashlib.md5(
        orjson.dumps(data, option=orjson.OPT_SORT_KEYS)).hexdigest()[:12]



@dataclass
class WhatIfReport:
    name: str
    overrides: dict
    topic: str
    shadow_namespace: str
    live_counts: dict = field(default_factory=dict)
    whatif_counts: dict = field(default_factory=dict)
    causes: int = 0
    differing: int = 0
    examples: list = field(default_factory=list)
    skipped_erased: int = 0
    live_state: dict = field(default_factory=dict)
    whatif_state: dict = field(default_factory=dict)
    seconds: float = 0.0
    profile: dict = field(default_factory=dict)          # the rules profile the what-if decided under
    live_profiles: dict = field(default_factory=dict)    # hash → live decisions compared that carry it
    known_profiles: dict = field(default_factory=dict)   # hash → its settings, from the log's rules.adopted

    def profiles_as_dict(self) -> dict:
        """The what-if's profile, and each live one with the settings where it differs from it."""
        mine = self.profile.get("settings", {})
        live = {}
        for h, n in sorted(self.live_profiles.items(), key=lambda x: -x[1]):
            settings = self.known_profiles.get(h)
            live[h] = {"decisions": n, "differs": None if settings is None else
                       {name: {"live": a, "whatif": b} for name, a, b in differences(settings, mine)}}
        return {"whatif": self.profile, "live": live}

    def as_dict(self) -> dict:
        types = sorted(set(self.live_counts) | set(self.whatif_counts), key=lambda t: DECISIONS.index(t) if t in DECISIONS else 99)
        return {"name": self.name, "overrides": self.overrides, "topic": self.topic,
                "shadow_namespace": self.shadow_namespace,
                "decisions": {t: {"live": self.live_counts.get(t, 0), "whatif": self.whatif_counts.get(t, 0),
                                  "delta": self.whatif_counts.get(t, 0) - self.live_counts.get(t, 0)} for t in types},
                "causes": self.causes, "decided_differently": self.differing, "examples": self.examples,
                "skipped_erased_facts": self.skipped_erased,
                "memory": {"live": self.live_state, "whatif": self.whatif_state},
                "rules_profiles": self.profiles_as_dict(), "seconds": round(self.seconds, 2)}


def render(report: dict) -> str:
    lines = [f"what-if {report['name']} {report['overrides']}  →  topic {report['topic']}, "
             f"read models {report['shadow_namespace']}", "", f"  {'decision':<20}{'live':>10}{'what-if':>10}{'delta':>10}"]
    for t, c in report["decisions"].items():
        lines.append(f"  {t:<20}{c['live']:>10,}{c['whatif']:>10,}{c['delta']:>+10,}")
    profiles = report.get("rules_profiles") or {}
    if profiles:
        lines += ["", f"  what-if decided under rules profile {profiles['whatif'].get('hash')}"]
        for h, p in profiles["live"].items():
            if h == UNRECORDED:
                lines.append(f"  live: {p['decisions']:,} decisions from before decisions recorded their profile")
                continue
            differs = p["differs"]
            what = ("settings not in the log" if differs is None else "the same settings" if not differs else
                    "; ".join(f"{k} {v['live']} → {v['whatif']}" for k, v in differs.items()))
            lines.append(f"  live: {p['decisions']:,} decisions under rules profile {h} ({what})")
    lines += ["", f"  {report['decided_differently']:,} of {report['causes']:,} facts/ticks decided differently"]
    for ex in report["examples"]:
        lines.append(f"  - {ex['cause_type']} {ex['cause_id']}" + (f": {ex['content']}" if ex.get("content") else ""))
        lines += [f"      live:    {s}" for s in ex["live"]] or ["      live:    (nothing)"]
        lines += [f"      what-if: {s}" for s in ex["whatif"]] or ["      what-if: (nothing)"]
    live, wi = report["memory"]["live"], report["memory"]["whatif"]
    lines += ["", "  memory items by status (live → what-if): " + ", ".join(
        f"{k} {live.get(k, 0):,} → {wi.get(k, 0):,}" for k in sorted(set(live) | set(wi)))]
    return "\n".join(lines)


def _state_counts(settings: Settings) -> dict:
    out: dict = {}
    with psycopg.connect(settings.pg_dsn(), autocommit=True) as conn:
        s = sql.Identifier(settings.namespace)
        if stores.table_exists(conn, settings.namespace, "memory_items"):
            for status, n in conn.execute(sql.SQL("SELECT status, count(*) FROM {}.memory_items GROUP BY status").format(s)):
                out[status] = n
        if stores.table_exists(conn, settings.namespace, "preferences"):
            out["preferences"] = conn.execute(sql.SQL("SELECT count(*) FROM {}.preferences").format(s)).fetchone()[0]
    return out


def whatif(settings: Settings, name: str, overrides: list[str] | dict, *, keys=None, progress: bool = True,
           examples: int = 5, project: bool = True) -> WhatIfReport:
    began = time.monotonic()
    changed, values = parse_overrides(settings, overrides)
    rules = Rules.from_settings(changed)
    log_ns, shadow = whatif_names(settings, name)
    topic = f"{log_ns}.memory"
    report = WhatIfReport(name, {k: (str(v) if not isinstance(v, (int, float, str, bool)) else v) for k, v in values.items()},
                          topic, shadow.namespace)
    profile = profile_of(rules)
    report.profile = {"hash": profile_hash(profile), "settings": profile}
    own_keys = keys is None
    if own_keys:
        keys = KeyStore(settings)
    try:
        _fresh_topic(settings, topic)
        core = in_memory_core(changed, rules, keys)
        live_sig: dict[str, list[str]] = defaultdict(list)
        wi_sig: dict[str, list[str]] = defaultdict(list)
        cause_types: dict[str, str] = {}
        erased_users: set[str] = set()
        producer = Producer(producer_config(settings, ADMIN, **{"linger.ms": 20}))

        def send(partition: int, key: bytes | None, raw: bytes) -> None:
            while True:   # the partition is the fact's: one user's decisions stay in one partition, in order
                try:
                    producer.produce(topic, value=raw, key=key, partition=partition)
                    return
                except BufferError:
                    producer.poll(0.05)

        facts_t, memory_t = settings.topic("facts"), settings.topic("memory")
        r = reader(kafka_config(settings, ADMIN), "whatif")
        try:
            ends = r.ends({facts_t, memory_t})
            bar = Progress("what-if", sum(ends.values()), enabled=progress)
            for p in range(settings.partitions):
                for m in _merged(r, [(facts_t, p), (memory_t, p)], ends):
                    bar.update(1)
                    for out in _handle(core, m, facts_t, p, keys, live_sig, cause_types, erased_users, report):
                        env = out.envelope
                        raw = encode(env, keys)
                        send(p, out.key.encode(), raw)
                        rec = peek(raw)
                        if not _time_only(rec):
                            wi_sig[env.causation].append(_signature(rec))
                        if env.type in DECISIONS:
                            kind = TIME_ONLY if _time_only(rec) else env.type
                            report.whatif_counts[kind] = report.whatif_counts.get(kind, 0) + 1
                    if m.topic() == memory_t and peek(m.value()).get("type") in PASS_THROUGH:
                        send(p, m.key(), m.value())     # the projections need erasures and forgetting too
                    producer.poll(0)
            bar.close()
        finally:
            r.close()
            left = producer.flush(120)
            if left:
                raise MemstreamError(f"{left} what-if records undelivered")
        # per cause (a fact, a tick): the same decisions, with the same clear values?
        differing = [cid for cid in sorted(live_sig.keys() | wi_sig.keys())
                     if sorted(live_sig.get(cid, [])) != sorted(wi_sig.get(cid, []))]
        report.causes = len(live_sig.keys() | wi_sig.keys())
        report.differing = len(differing)
        report.examples = _examples(settings, keys, topic, differing[:examples], cause_types)

        if project:
            drop_shadow(settings, shadow, list(WHATIF_PROJECTORS), shadow.namespace)
            projectors = [make_projector(n, shadow, shadow.namespace) for n in WHATIF_PROJECTORS]
            try:
                for pr in projectors:
                    pr.setup()
                Replayer(kafka_config(settings, ADMIN), keys, max_future_skew_s=settings.max_future_skew_s, progress=progress, progress_label="what-if projections").run(projectors)
            finally:
                for pr in projectors:
                    pr.close()
            report.live_state = _state_counts(settings)
            report.whatif_state = _state_counts(shadow)
        report.seconds = time.monotonic() - began
        note(f"what-if {name}: {report.differing:,} of {report.causes:,} causes decided differently "
             f"({report.seconds:.1f}s)", progress)
        return report
    finally:
        if own_keys:
            keys.close()


def _handle(core: MemoryCore, m, facts_t: str, partition: int, keys, live_sig, cause_types, erased_users,
            report: WhatIfReport) -> list:
    """What the core emits for one live record (continuation ticks aside: the live ones are in
    the log and come through here too); the live decisions are noted for the comparison."""
    if watermarks.parse(m.headers()) is not None or not m.value():
        return []
    if m.topic() == facts_t:
        try:
            fact = decode_confluent(m, keys, core.max_future_skew_s)
        except InvalidEvent:
            return []        # dead-lettered by the live processor (the same decode path)
        if fact.erased:
            erased_users.add(fact.user)
            report.skipped_erased += 1
            return []
        if fact.type not in ("fact.extracted", "relations.extracted"):
            return []
        cause_types[fact.id] = "fact"
        return list(core.on_fact(fact))
    rec = peek(m.value())
    kind = rec.get("type")
    if kind in DECISIONS:
        if rec.get("user") in erased_users:
            return []
        if rec.get("producer", "").startswith("memory-processor"):
            if _time_only(rec):
                report.live_counts[TIME_ONLY] = report.live_counts.get(TIME_ONLY, 0) + 1
            else:
                live_sig[rec.get("causation")].append(_signature(rec))
                report.live_counts[kind] = report.live_counts.get(kind, 0) + 1
            made_under = (rec.get("data") or {}).get("rules_profile") or UNRECORDED
            report.live_profiles[made_under] = report.live_profiles.get(made_under, 0) + 1
        return []
    if kind == "rules.adopted" and isinstance((rec.get("data") or {}).get("settings"), dict):
        report.known_profiles.setdefault(rec["data"].get("profile"), rec["data"]["settings"])
        return []
    if kind == "decay.ticked":
        cause_types[rec.get("id")] = "tick"
    env = memory_input(m.key(), m.value(), keys, appended_ms=confluent_appended_ms(m),
                       max_future_skew_s=core.max_future_skew_s)
    if env is None:
        return []
    return [out for out in core.on_control(env, partition) if not out.continuation]


def _merged(r: LogReader, tps: list[tuple[str, int]], ends: dict):
    """The records of a few partitions, merged by record timestamp (ties: the order of `tps`)."""
    live = [tp for tp in tps if ends.get(tp, 0) > 0]
    if not live:
        return
    batches = r.read({tp: (0, ends[tp]) for tp in live}, batch_size=2000)
    queues: dict[tuple[str, int], deque] = {tp: deque() for tp in live}
    while True:
        # a record can be chosen once every partition still being read has one queued
        while any(not queues[tp] and tp in r.unfinished for tp in live):
            for m in next(batches, ()):
                queues[(m.topic(), m.partition())].append(m)
        ready = [tp for tp in live if queues[tp]]
        if not ready:
            break
        tp = min(ready, key=lambda x: (queues[x][0].timestamp()[1], live.index(x)))
        yield queues[tp].popleft()


def _examples(settings: Settings, keys, topic: str, causes: list[str], cause_types: dict) -> list[dict]:
    """For each differing cause: the fact's content, and the live and what-if decisions in words."""
    if not causes:
        return []
    wanted = set(causes)
    live_rows = _rows(settings, "causation_id = ANY(%s) OR event_id = ANY(%s)", (list(wanted), list(wanted)))
    records = fetch(settings, [(r["topic"], r["partition"], r["offset"]) for r in live_rows])
    by_cause: dict[str, dict] = {cid: {"cause_id": cid, "cause_type": cause_types.get(cid, "?"), "live": [], "whatif": []}
                                 for cid in causes}
    for r in live_rows:
        m = records.get((r["topic"], r["partition"], r["offset"]))
        rec = peek(m.value()) if m is not None else {}
        if r["event_id"] in wanted and r["type"] == "fact.extracted" and m is not None:
            try:
                env = decode(m.value(), keys)
                by_cause[r["event_id"]]["content"] = None if env.erased else env.data.content
            except InvalidEvent:
                pass
        elif r["causation_id"] in wanted and rec.get("type") in DECISIONS:
            by_cause[r["causation_id"]]["live"].append(summary({"type": rec["type"], "data": rec.get("data") or {}}))
    with reader(kafka_config(settings, ADMIN), "whatif-examples") as r:
        for tp, span in sorted(r.spans([topic]).items()):   # partition by partition, as the decisions were sent
            for m in r.records({tp: span}, batch_size=2000):
                rec = peek(m.value())
                if rec.get("causation") in wanted and rec.get("type") in DECISIONS:
                    by_cause[rec["causation"]]["whatif"].append(summary({"type": rec["type"], "data": rec.get("data") or {}}))
    return [by_cause[cid] for cid in causes]
