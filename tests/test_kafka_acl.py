"""Kafka least privilege on the real broker of the test stack: SASL/SCRAM and ACLs.

adapters/kafka_auth.py: clients authenticate over SASL/SCRAM-SHA-512; the publisher principal
(SDK/API) writes only the input topics, the control principal (the API's memory-topic writes) only
the memory topic, the worker principal (pipeline) cannot administer the cluster, and nobody gets in
without a password.
"""
from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

from adapters.bus import producer_config
from kernel.config import Settings
from adapters.kafka_auth import ADMIN, CONTROL, PRINCIPALS, PUBLISHER, WORKER, kafka_config, password_file


def _deliver(config: dict, topic: str, timeout: float = 15.0) -> tuple[KafkaError | None, list[KafkaError]]:
    """Produce one record with `config`; (the delivery error or None, errors the client reported)."""
    errors: list[KafkaError] = []
    results: list = []
    p = Producer({**config, "message.timeout.ms": int(timeout * 1000) - 2000, "log_level": 0,
                  "error_cb": errors.append})
    p.produce(topic, key=b"acl-probe", value=b"{}", on_delivery=lambda err, msg: results.append(err))
    p.flush(timeout)
    assert results, "no delivery report"
    return results[0], errors


def _assert_refused(settings, config: dict, topics) -> None:
    for name in topics:
        err, _ = _deliver(config, settings.topic(name))
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, (name, err)


def test_a_client_without_credentials_is_refused(settings):
    err, _ = _deliver({"bootstrap.servers": settings.kafka_bootstrap}, settings.topic("turns"), timeout=6)
    assert err is not None                       # the broker speaks SASL only: no record gets in


def test_a_wrong_password_is_refused(settings):
    cfg = {**kafka_config(settings, PUBLISHER), "sasl.password": "not-the-password"}
    err, errors = _deliver(cfg, settings.topic("turns"), timeout=6)
    assert err is not None
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def test_the_publisher_publishes_a_turn_but_cannot_write_facts_or_memory(settings):
    pub = producer_config(settings, PUBLISHER)
    err, _ = _deliver(pub, settings.topic("turns"))
    assert err is None
    _assert_refused(settings, pub, ("facts", "memory", "deadletter"))


def test_the_sdk_publishes_turns_as_the_publisher(settings, client):
    assert client.record_turn("acl-user", "s1", "user", "I like green tea").offset >= 0


def test_the_publisher_cannot_join_the_pipelines_consumer_groups(settings):
    """Committing offsets for `<ns>.memory` would make the memory processor skip facts."""
    c = Consumer({**kafka_config(settings, PUBLISHER), "group.id": f"{settings.namespace}.memory", "log_level": 0,
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe([settings.topic("facts")])
        codes = set()
        for _ in range(20):
            m = c.poll(0.5)
            if m is not None and m.error():
                codes.add(m.error().code())
                break
        assert KafkaError.GROUP_AUTHORIZATION_FAILED in codes, codes
    finally:
        c.close()


def test_the_publisher_cannot_create_topics(settings):
    admin = AdminClient(kafka_config(settings, PUBLISHER))
    fut = admin.create_topics([NewTopic(settings.topic(f"x{uuid.uuid4().hex[:6]}"), 1, 1)])
    with pytest.raises(Exception, match="TOPIC_AUTHORIZATION_FAILED|not authorized|Authorization"):
        next(iter(fut.values())).result(timeout=15)


def test_the_worker_cannot_create_acls_or_alter_scram_users(settings):
    admin = AdminClient(kafka_config(settings, WORKER))
    grant = AclBinding(ResourceType.TOPIC, settings.topic("memory"), ResourcePatternType.LITERAL,
                       f"User:memstream-{PUBLISHER}", "*", AclOperation.WRITE, AclPermissionType.ALLOW)
    with pytest.raises(Exception, match="CLUSTER_AUTHORIZATION_FAILED|not authorized|Authorization"):
        next(iter(admin.create_acls([grant], request_timeout=15).values())).result(timeout=20)
    upsert = UserScramCredentialUpsertion(f"memstream-{PUBLISHER}",
                                          ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"hijacked")
    with pytest.raises(Exception, match="CLUSTER_AUTHORIZATION_FAILED|not authorized|Authorization"):
        next(iter(admin.alter_user_scram_credentials([upsert], request_timeout=15).values())).result(timeout=20)


def test_the_control_principal_writes_the_memory_topic_and_nothing_else(settings):
    """memory.recalled, forget and erase from the API/MCP/CLI: a leaked API credential writes the
    memory topic (whose control events also need the key store's HMAC), not facts or turns, and
    administers nothing."""
    ctl = producer_config(settings, CONTROL)
    err, _ = _deliver(ctl, settings.topic("memory"))
    assert err is None
    _assert_refused(settings, ctl, ("facts", "turns", "deadletter"))
    admin = AdminClient(kafka_config(settings, CONTROL))
    fut = admin.create_topics([NewTopic(settings.topic(f"x{uuid.uuid4().hex[:6]}"), 1, 1)])
    with pytest.raises(Exception, match="TOPIC_AUTHORIZATION_FAILED|not authorized|Authorization"):
        next(iter(fut.values())).result(timeout=15)


def test_the_worker_writes_the_memory_topic(settings):
    err, _ = _deliver(producer_config(settings, WORKER), settings.topic("memory"))
    assert err is None


def test_passwords_are_private_files_and_never_shown(settings):
    for p in PRINCIPALS:
        assert password_file(settings, p).stat().st_mode & 0o777 == 0o600
    conf = settings.stack_dir / "kafka" / "server.properties"      # holds the admin password (JAAS)
    assert conf.stat().st_mode & 0o777 == 0o600
    shown = Settings(kafka_admin_password="s3cret-admin", kafka_publisher_password="s3cret-pub").masked()
    assert shown["kafka_admin_password"] == "********" and "s3cret" not in repr(shown)
    assert "s3cret" not in repr(Settings(kafka_admin_password="s3cret-admin"))
    assert kafka_config(settings, ADMIN)["sasl.username"] == "memstream-admin"
