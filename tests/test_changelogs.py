"""State changelogs are made before any worker starts, with the partitions and configs faust would
give them, and the same configs applied to changelogs that already existed with Kafka's defaults;
a topic with another partition count is reported whole (real broker)."""
from __future__ import annotations

import os
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from adapters import topology
from adapters.bus import ensure_topics
from kernel.config import get_settings
from adapters.kafka_auth import ADMIN, kafka_config
from tests.helpers import wait_for
from streams.app import changelog_configs
from streams.memory_processor import build

pytestmark = pytest.mark.stack


def _configs(admin, names):
    out = {}
    for res, fut in admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, n) for n in names]).items():
        out[res.name] = {k: v.value for k, v in fut.result(timeout=30).items()}
    return out


def _configs_once_known(admin, names) -> dict:
    """_configs, or {} while a topic just created is not yet known to the broker answering (a
    loaded broker answered UNKNOWN_TOPIC_OR_PART right after create_topics returned): for wait_for."""
    try:
        return _configs(admin, names)
    except KafkaException as exc:
        if exc.args and exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return {}
        raise


def _namespace(tag: str):
    return get_settings().model_copy(update={"namespace": f"{os.environ['MEMSTREAM_TEST_NAMESPACE']}_{tag}{uuid.uuid4().hex[:4]}"})


def test_changelogs_exist_with_their_source_partitions_before_any_worker_starts():
    s = _namespace("cm")
    created = ensure_topics(s)
    app = build(s, None)
    names = sorted(t.changelog_topic.get_topic_name() for t in app.tables.values())
    assert names == sorted(topology.changelog_topics(s))   # faust's own names for the tables it declares
    assert set(names) <= set(created)
    admin = AdminClient(kafka_config(s, ADMIN))
    md = admin.list_topics(timeout=30).topics
    for name in names + [s.topic("facts"), s.topic("memory")]:
        assert len(md[name].partitions) == s.partitions, name
        assert all(p.leader >= 0 for p in md[name].partitions.values()), name
    got = _configs(admin, names + [s.topic("turns")])   # configs given at creation: there at once
    for name in names:
        assert {k: got[name][k] for k in changelog_configs(s)} == changelog_configs(s), name
    assert got[s.topic("turns")]["message.timestamp.type"] == "LogAppendTime"
    assert ensure_topics(s) == []   # idempotent


def test_a_topic_with_another_partition_count_is_reported_whole_before_anything_runs():
    s = _namespace("pm")
    admin = AdminClient(kafka_config(s, ADMIN))
    ensure_topics(s)
    odd = topology.changelog_topics(s)[1]
    for fut in admin.delete_topics([odd]).values():
        fut.result(timeout=30)
    deadline = time.monotonic() + 30
    while odd in admin.list_topics(timeout=30).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    for fut in admin.create_topics([NewTopic(odd, num_partitions=s.partitions + 1, replication_factor=1)]).values():
        fut.result(timeout=30)
    with pytest.raises(topology.TopologyMismatch) as err:
        ensure_topics(s)
    text = str(err.value)
    assert f"{odd} has {s.partitions + 1}" in text and f"MEMSTREAM_PARTITIONS={s.partitions}" in text
    assert f"set MEMSTREAM_PARTITIONS={s.partitions + 1}" in text


def test_existing_changelogs_get_compaction_that_runs():
    s = _namespace("cl")
    app = build(s, None)
    names = sorted(t.changelog_topic.get_topic_name() for t in app.tables.values())
    assert len(names) == 4   # user state, user ledger, window vectors, session state
    admin = AdminClient(kafka_config(s, ADMIN))
    # as an older version left them: compacted in name, but with 7-day / 1-GiB segments
    for fut in admin.create_topics([NewTopic(n, num_partitions=s.partitions, replication_factor=1,
                                             config={"cleanup.policy": "compact"}) for n in names]).values():
        fut.result(timeout=30)
    wait_for(lambda: (got := _configs_once_known(admin, names)) and all(
        c.get("segment.ms") == str(7 * 24 * 3600 * 1000) for c in got.values()), timeout=30, what="the old-style changelogs to exist with 7-day segments")
    ensure_topics(s)   # the log's topics; the changelogs exist (the partition check passes)
    assert sorted(topology.align_configs(admin, s)) == names
    wanted = changelog_configs(s)
    # A broker applies a config change through its metadata log: a describe right after may show the old one.
    wait_for(lambda: (now := _configs_once_known(admin, names)) and all(
        {k: got[k] for k in wanted} == wanted for got in now.values()),
             timeout=30, what="the changelog configs to be applied")
    # and a table's own topic declaration carries the same configs, for changelogs faust creates
    assert all(dict(t.changelog_topic.config) == wanted for t in app.tables.values())
