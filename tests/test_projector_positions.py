"""Projector positions: stored with the data, advanced past ignored events, resumed exactly."""
from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from projections import pg
from projections.postgres_projectors import PreferencesProjector
from projections.queries import preferences
from projections.runner import ProjectorRunner
from tests.helpers import unique_user, wait_for
from adapters.kafka_auth import ADMIN, kafka_config


def end_offsets(settings, topic):
    c = Consumer({**kafka_config(settings, ADMIN), "group.id": "probe"})
    try:
        parts = c.list_topics(topic, timeout=5).topics[topic].partitions
        return {(topic, p): c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in parts}
    finally:
        c.close()


def test_positions_cover_ignored_events_and_a_rerun_applies_nothing(settings, client, keys, pipeline):
    user = unique_user("pos")
    client.record_turn(user, "s", "user", "I live in Oslo and I like skiing")
    wait_for(lambda: len(preferences(settings, user)) == 2, what="2 preferences")
    topic = settings.topic("memory")
    ends = {k: v for k, v in end_offsets(settings, topic).items() if v > 0}

    projector = PreferencesProjector(settings)
    projector.name = "kv-preferences-rerun"  # its own positions: a second, independent projector
    first = ProjectorRunner(projector, settings, keys, group_suffix="-rerun")
    first.run(idle_exit_after=3.0)
    conn = pg.connect(settings)
    stored = pg.load_positions(conn, settings, projector.name)
    # memory.created events are ignored by this projector, yet every partition is fully covered.
    assert {k: stored.get(k) for k in ends} == ends

    second_projector = PreferencesProjector(settings)
    second_projector.name = projector.name
    second = ProjectorRunner(second_projector, settings, keys, group_suffix="-rerun2")
    second.run(idle_exit_after=3.0)
    assert second.applied == 0, "resumed from its stored positions, nothing applied twice"
    conn.close()
