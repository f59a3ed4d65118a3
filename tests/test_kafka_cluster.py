"""The local stack's Kafka as a cluster (`memstream stack up --brokers 3`), in-process: what each
node's config says, what clients bootstrap from, and that a stack's size cannot change under it.
The broker-kill fault test (tests/test_faults_pipeline.py) runs such a cluster for real."""
from __future__ import annotations

from pathlib import Path

import pytest

from kernel.config import Settings
from kernel.errors import StackError
from memstream.stack import services
from memstream.stack.kafka import Kafka


def _settings(tmp_path: Path, brokers: int | None) -> Settings:
    return Settings(stack_dir=tmp_path, kafka_port=40092, kafka_controller_port=40093, kafka_brokers=brokers,
                    kafka_admin_password="a" * 32)


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_a_three_node_cluster_replicates_every_topic_three_times_and_needs_two_for_a_write(tmp_path):
    s = _settings(tmp_path, 3)
    assert s.kafka_bootstrap == "127.0.0.1:40092,127.0.0.1:40192,127.0.0.1:40292"
    assert (s.kafka_replication_factor, s.kafka_min_insync) == (3, 2)
    nodes = [svc for svc in services._services(s) if isinstance(svc, Kafka)]
    assert [n.name for n in nodes] == ["kafka", "kafka-2", "kafka-3"]
    assert len({n.data_dir for n in nodes}) == len({n.config_file for n in nodes}) == 3
    p2 = _props(nodes[1].server_properties())
    assert p2["node.id"] == "2"
    assert p2["listeners"] == "CLIENT://127.0.0.1:40192,CONTROLLER://127.0.0.1:40193"
    assert p2["controller.quorum.voters"] == "1@127.0.0.1:40093,2@127.0.0.1:40193,3@127.0.0.1:40293"
    assert "controller.quorum.bootstrap.servers" not in p2          # a static quorum: formatted alike
    for key in ("offsets.topic.replication.factor", "default.replication.factor",
                "transaction.state.log.replication.factor"):
        assert p2[key] == "3", key
    assert p2["min.insync.replicas"] == p2["transaction.state.log.min.isr"] == "2"


def test_one_node_keeps_the_single_node_stack_as_it_was(tmp_path):
    s = _settings(tmp_path, None)
    assert s.kafka_cluster_size == 1 and s.kafka_bootstrap == "127.0.0.1:40092"
    (node,) = [svc for svc in services._services(s) if isinstance(svc, Kafka)]
    p = _props(node.server_properties())
    assert (node.name, p["node.id"], p["controller.quorum.bootstrap.servers"]) == ("kafka", "1", "127.0.0.1:40093")
    assert node.data_dir == tmp_path / "data" / "kafka"
    assert p["offsets.topic.replication.factor"] == p["min.insync.replicas"] == "1"


def test_the_stack_records_its_size_and_refuses_another(tmp_path):
    Kafka(_settings(tmp_path, 3))._check_size()
    assert _settings(tmp_path, None).kafka_cluster_size == 3      # every later command reads it
    with pytest.raises(StackError, match="created with 3 broker"):
        Kafka(_settings(tmp_path, 1))._check_size()


def test_a_stack_formatted_before_clusters_is_one_node(tmp_path):
    (tmp_path / "data" / "kafka").mkdir(parents=True)
    (tmp_path / "data" / "kafka" / "meta.properties").write_text("node.id=1\n")
    with pytest.raises(StackError, match="created with 1 broker"):
        Kafka(_settings(tmp_path, 3))._check_size()
