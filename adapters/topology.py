"""Every Kafka topic a namespace needs, created and checked before any worker starts.

Two kinds of topic:
- the log (turns, tasks, facts, memory, deadletter): the truth, kept forever (law 1);
- the state changelogs of the stateful stream processors (faust tables): compacted copies of
  per-user working state, derived, restorable.

Why the changelogs are made here and not left to faust: faust creates a table's changelog when
its worker starts, then checks that the changelog has as many partitions as the table's source
topic using its consumer's cached metadata. On a slow machine that metadata was read before the
new topic's partitions had leaders, faust saw "0 partitions", and the memory worker retried the
PartitionsMismatch for 100–120 s until its metadata refreshed (the quick start failed in 2 of 5
fresh clones at load average 13–47). Created here, as the admin principal, and returned only once
every partition has a leader, the changelogs are in the metadata the worker reads at start.

Partitions are fixed when a namespace is made (a user's events must stay in one partition, in
order: law 4). A topic whose partition count differs from MEMSTREAM_PARTITIONS is reported once,
whole, with what to do — never retried.

The laws cited here are defined in docs/concepts.md#laws.
"""
from __future__ import annotations

import time

from kernel.config import Settings
from kernel.errors import MemstreamError

LOG_TOPICS = ("turns", "tasks", "facts", "memory", "deadletter")
# The stateful apps (faust app name = consumer group suffix) and their tables. faust names a
# table's changelog "<app id>-<table>-changelog"; tests/test_changelogs.py checks these names
# against the tables the memory worker really declares.
STATE_TABLES: dict[str, tuple[str, ...]] = {"memory": ("user-state", "user-ledger", "user-vectors", "session-state")}


class TopologyMismatch(MemstreamError):
    """A topic exists with another partition count than the settings ask for."""


def log_topic_config(settings: Settings) -> dict[str, str]:
    """The log's topic configs.

    - Infinite retention: the log is the truth (law 1), never trimmed by time or size.
    - On a cluster an acks=all write needs min.insync.replicas copies (Settings.kafka_min_insync).
    - LogAppendTime: every record's timestamp is the broker's clock when it was appended, so an
      event time can be checked against a clock no producer controls (schemas/records.py: an event
      dated past the broker's time + MEMSTREAM_MAX_FUTURE_SKEW_S is poison, live and in replay alike,
      since the timestamp is stored in the log).
    """
    return {"retention.ms": "-1", "retention.bytes": "-1", "min.insync.replicas": str(settings.kafka_min_insync),
            "message.timestamp.type": "LogAppendTime"}


def changelog_config(settings: Settings) -> dict[str, str]:
    """Topic configs of every state changelog, so compaction actually runs.

    Kafka compacts only closed segments, and a segment closes after segment.ms (7 days by
    default) or segment.bytes (1 GiB): with the defaults a changelog that rewrites each user's
    state on every fact never compacts at all (212 MB on disk for 16 MB of live state in an
    8-minute soak). Short segments, a low dirty ratio and a maximum compaction lag bound it to a
    few times the live state. Tombstones (erased users) stay delete.retention.ms (1 day) so a
    restoring replica sees them.
    """
    seg = settings.changelog_segment_ms
    return {"cleanup.policy": "compact", "segment.ms": str(seg), "segment.bytes": str(16 * 1024 * 1024),
            "min.cleanable.dirty.ratio": "0.1", "max.compaction.lag.ms": str(2 * seg)}


def changelog_topics(settings: Settings) -> list[str]:
    return [f"{settings.namespace}.{app}-{table}-changelog"
            for app, tables in STATE_TABLES.items() for table in tables]


def wanted_topics(settings: Settings) -> dict[str, dict[str, str]]:
    """Every topic of the namespace with the configs it is created with."""
    out = {settings.topic(name): log_topic_config(settings) for name in LOG_TOPICS}
    out.update({name: changelog_config(settings) for name in changelog_topics(settings)})
    return out


def check_partitions(present: dict[str, int], wanted: list[str], partitions: int) -> None:
    """Raise TopologyMismatch naming every topic of `wanted` whose partition count (in `present`)
    is not `partitions`. Pure: the caller reads the counts from the broker."""
    wrong = {t: present[t] for t in wanted if t in present and present[t] != partitions}
    if not wrong:
        return
    listed = ", ".join(f"{t} has {n}" for t, n in sorted(wrong.items()))
    counts = sorted(set(wrong.values()))
    hint = (f"set MEMSTREAM_PARTITIONS={counts[0]} for this namespace" if len(counts) == 1
            else "the topics disagree among themselves: drop the namespace (memstream namespace drop) and start again")
    raise TopologyMismatch(
        f"partition counts differ from MEMSTREAM_PARTITIONS={partitions}: {listed}. A namespace's partition count is "
        f"fixed when it is created (each user's events stay in one partition, in order; a table's changelog must "
        f"match its source topic), so workers cannot run on it as configured: {hint}, or use a new namespace "
        f"(MEMSTREAM_NAMESPACE).")


def create_missing(admin, settings: Settings, timeout: float = 30.0) -> list[str]:
    """Create the namespace's missing topics (log and changelogs) with `admin` (a confluent-kafka
    AdminClient as the admin principal); check every existing one's partition count; return once
    every new partition has a leader. Returns the topics created."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic
    wanted = wanted_topics(settings)
    # 1. What exists, with its partition count: a mismatch is reported before anything is made.
    present = {name: len(md.partitions) for name, md in admin.list_topics(timeout=timeout).topics.items()}
    check_partitions(present, list(wanted), settings.partitions)
    new = [NewTopic(t, num_partitions=settings.partitions, replication_factor=settings.kafka_replication_factor,
                    config=config) for t, config in wanted.items() if t not in present]
    if not new:
        return []
    # 2. Create; another process creating the same topic at the same time is not an error.
    for fut in admin.create_topics(new, operation_timeout=timeout).values():
        try:
            fut.result()
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
    # 3. A created topic's partitions get their leader a moment later; a reader of offsets (or
    #    faust's partition check) at once would see NOT_LEADER or "0 partitions", so wait for them.
    names = [t.topic for t in new]
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(timeout=timeout).topics
        ready = [t for t in names if t in md and len(md[t].partitions) == settings.partitions
                 and all(p.leader >= 0 for p in md[t].partitions.values())]
        if len(ready) == len(names):
            return names
        if time.monotonic() > deadline:
            missing = sorted(set(names) - set(ready))
            raise MemstreamError(f"topics created but without a leader for every partition after {timeout:.0f} s: "
                                 f"{', '.join(missing)} (is the broker overloaded? see its log)")
        time.sleep(0.1)


def align_configs(admin, settings: Settings, timeout: float = 30.0) -> list[str]:
    """Set the wanted configs on topics made before they were wanted (changelogs made by an older
    version never compacted; log topics made before LogAppendTime). Incremental SET leaves every
    other config as it is. Returns the topics altered."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    wanted = wanted_topics(settings)
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in wanted]
    stale = []
    for res, fut in admin.describe_configs(resources).items():
        try:
            got = {k: v.value for k, v in fut.result(timeout=timeout).items()}
        except Exception:  # noqa: BLE001 - a topic not there (yet): nothing to align
            continue
        differing = {k: v for k, v in wanted[res.name].items() if got.get(k) != v}
        if differing:
            stale.append(ConfigResource(ConfigResource.Type.TOPIC, res.name, incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in differing.items()]))
    if stale:
        for fut in admin.incremental_alter_configs(stale).values():
            fut.result(timeout=timeout)
    return [r.name for r in stale]
