"""Consumer lag: for every consumer group of the namespace, committed offset vs. high watermark.

Groups are found by name (`<namespace>.extractor`, `<namespace>.memory`,
`<namespace>.projector.<name>`, …), so a new projector or processor shows up without a list to
keep. Lag per partition = high watermark − committed offset; a partition of a topic the group has
committed on, but not on that partition yet, counts from the log's start (the consumers reset to
earliest). A group that has not committed on a topic at all is not seen on that topic yet.

For projectors the committed offset is a hint they write after each transaction (their truth is
the position table, law 3), so their lag here can trail the truth by one batch, never run ahead.

Costs per read: one ListGroups, one OffsetFetch per group (concurrent) and one ListOffsets for all
partitions. `LagCollector` serves it to Prometheus, cached `MEMSTREAM_METRICS_LAG_CACHE_S` so a
scrape every few seconds stays cheap.

The laws cited here are defined in docs/concepts.md#laws.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict, dataclass

log = logging.getLogger("memstream.lag")


@dataclass(frozen=True, slots=True)
class PartitionLag:
    group: str
    topic: str
    partition: int
    committed: int | None   # None: nothing committed on this partition yet
    high: int
    lag: int

    def as_dict(self) -> dict:
        return asdict(self)


def consumer_lag(settings, timeout: float = 10.0, groups: list[str] | None = None) -> list[PartitionLag]:
    """Every partition lag of the namespace's groups (or of `groups`), sorted. Raises on a broker
    that does not answer (confluent_kafka.KafkaException)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    # log_level 0: a broker that is away is reported by the caller once, not logged by librdkafka every second
    from adapters.kafka_auth import PUBLISHER, kafka_config   # describing groups and offsets: the API's principal will do
    admin = AdminClient({**kafka_config(settings, PUBLISHER), "log_level": 0})
    if groups is None:
        prefix = f"{settings.namespace}."
        listed = admin.list_consumer_groups(request_timeout=timeout).result(timeout=timeout)
        groups = sorted(g.group_id for g in listed.valid if g.group_id.startswith(prefix))
    if not groups:
        return []
    # OffsetFetch takes one group per request: send them all, then collect.
    futures = {g: admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)],
                                                    request_timeout=timeout)[g] for g in groups}
    committed: dict[str, dict[tuple[str, int], int]] = {}
    for g, fut in futures.items():
        res = fut.result(timeout=timeout)
        committed[g] = {(tp.topic, tp.partition): tp.offset for tp in (res.topic_partitions or [])}
    topics = {t for offsets in committed.values() for t, _ in offsets}
    if not topics:
        return []
    meta = admin.list_topics(timeout=timeout).topics
    parts = [(t, p) for t in sorted(topics) if t in meta for p in sorted(meta[t].partitions)]
    high, low = {}, {}
    # list_offsets takes a partition once per request: latest and earliest in two requests
    for spec_of, into in ((OffsetSpec.latest, high), (OffsetSpec.earliest, low)):
        got = admin.list_offsets({TopicPartition(t, p): spec_of() for t, p in parts}, request_timeout=timeout)
        for tp, fut in got.items():
            into[(tp.topic, tp.partition)] = fut.result(timeout=timeout).offset
    out = []
    for g in groups:
        mine = {t for t, _ in committed[g]}
        for t, p in parts:
            if t not in mine:
                continue
            c = committed[g].get((t, p))
            c = c if c is not None and c >= 0 else None
            h = high[(t, p)]
            start = c if c is not None else low[(t, p)]
            out.append(PartitionLag(g, t, p, c, h, max(0, h - start)))
    return out


def lag_by_group(rows: list[PartitionLag]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        out[r.group] = out.get(r.group, 0) + r.lag
    return out


class LagCollector:
    """A Prometheus collector: `memstream_consumer_lag{group,topic,partition}`, the per-group sum
    and whether the last read worked, read at most every `metrics_lag_cache_s` seconds."""

    def __init__(self, settings):
        self.settings = settings
        self._lock = threading.Lock()
        self._at = 0.0
        self._rows: list[PartitionLag] = []
        self._ok = False
        self._seconds = 0.0

    def rows(self) -> tuple[list[PartitionLag], bool]:
        with self._lock:   # one read at a time; concurrent scrapes share it
            if time.monotonic() - self._at >= self.settings.metrics_lag_cache_s:
                started = time.monotonic()
                try:
                    self._rows, self._ok = consumer_lag(self.settings, timeout=5.0), True
                except Exception as exc:  # noqa: BLE001 - a scrape reports the failure, never raises
                    log.warning("consumer lag not read: %s: %s", type(exc).__name__, exc)
                    self._ok = False
                self._seconds = time.monotonic() - started
                self._at = time.monotonic()
            return self._rows, self._ok

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily
        rows, ok = self.rows()
        per = GaugeMetricFamily("memstream_consumer_lag", "Records between a group's committed offset and the "
                                "partition's high watermark.", labels=["group", "topic", "partition"])
        total = GaugeMetricFamily("memstream_consumer_group_lag", "A group's lag summed over its partitions.",
                                  labels=["group"])
        for r in rows:
            per.add_metric([r.group, r.topic, str(r.partition)], r.lag)
        for group, lag in sorted(lag_by_group(rows).items()):
            total.add_metric([group], lag)
        yield per
        yield total
        yield GaugeMetricFamily("memstream_consumer_lag_up", "1 if the last lag read answered, else 0 "
                                "(the values above are then the previous read's).", value=1 if ok else 0)
        yield GaugeMetricFamily("memstream_consumer_lag_read_seconds", "How long the last lag read took.",
                                value=self._seconds)

    def describe(self):
        return []   # collected on scrape only (registering must not call Kafka)
