"""State changelogs are compacted for real: the configs faust passes at creation, and the same
configs applied to changelogs that already existed with Kafka's defaults (real broker)."""
from __future__ import annotations

import os
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from memstream.bus import ensure_topics
from memstream.config import get_settings
from memstream.kafka_auth import ADMIN, kafka_config
from streams.app import changelog_configs, tune_changelogs
from streams.memory_processor import build

pytestmark = pytest.mark.stack


def _configs(admin, names):
    out = {}
    for res, fut in admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, n) for n in names]).items():
        out[res.name] = {k: v.value for k, v in fut.result(timeout=30).items()}
    return out


def test_existing_changelogs_get_compaction_that_runs():
    s = get_settings().model_copy(update={"namespace": f"{os.environ['MEMSTREAM_TEST_NAMESPACE']}_cl{uuid.uuid4().hex[:4]}"})
    ensure_topics(s)
    app = build(s, None)
    names = sorted(t.changelog_topic.get_topic_name() for t in app.tables.values())
    assert len(names) == 3   # user state, user ledger, session state
    admin = AdminClient(kafka_config(s, ADMIN))
    # as an older version left them: compacted in name, but with 7-day / 1-GiB segments
    for fut in admin.create_topics([NewTopic(n, num_partitions=s.partitions, replication_factor=1,
                                             config={"cleanup.policy": "compact"}) for n in names]).values():
        fut.result(timeout=30)
    time.sleep(0.5)
    assert all(c["segment.ms"] == str(7 * 24 * 3600 * 1000) for c in _configs(admin, names).values())
    assert sorted(tune_changelogs(app, s)) == names
    wanted = changelog_configs(s)
    for name, got in _configs(admin, names).items():
        assert {k: got[k] for k in wanted} == wanted, name
    # and a table's own topic declaration carries the same configs, for changelogs faust creates
    assert all(dict(t.changelog_topic.config) == wanted for t in app.tables.values())
