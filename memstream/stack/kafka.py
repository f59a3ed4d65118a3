"""Kafka 4.x, KRaft single node (broker + controller in one JVM), run from Maven Central jars."""
from __future__ import annotations

import base64
import uuid
from pathlib import Path

from memstream.stack import prereqs, process
from memstream.stack.base import Service

# Same flags as Kafka's own kafka-server-start.sh / kafka-run-class.sh, minus GC log files.
JVM_FLAGS = ["-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
             "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true"]
# The classpath's logging backend is slf4j-simple (memstream/stack/files/kafka/pom.xml): WARN overall, but keep
# the one INFO line "Kafka Server started" so the log shows each successful start.
LOG_FLAGS = ["-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
             "-Dorg.slf4j.simpleLogger.log.kafka.server.KafkaRaftServer=info",
             "-Dorg.slf4j.simpleLogger.showDateTime=true",
             "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss.SSS"]


def _cluster_id() -> str:
    """Kafka's Uuid format: 16 random bytes, url-safe base64, no padding. Kafka itself never
    hands out ids starting with '-' (they read as CLI flags), so neither do we."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


class Kafka(Service):
    name = "kafka"

    @property
    def lib(self) -> Path:
        return self.layout.lib / "kafka"

    @property
    def config_file(self) -> Path:
        return self.layout.root / "kafka" / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.layout.data / "kafka"

    @property
    def address(self) -> str:
        return self.settings.kafka_bootstrap

    def ports(self) -> list[tuple[str, int]]:
        s = self.settings
        return [(s.kafka_host, s.kafka_port), (s.kafka_host, s.kafka_controller_port)]

    def markers(self) -> list[str]:
        return ["kafka.Kafka", str(self.config_file)]

    def server_properties(self) -> str:
        s = self.settings
        ctl = f"{s.kafka_host}:{s.kafka_controller_port}"
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "listeners": f"PLAINTEXT://{s.kafka_host}:{s.kafka_port},CONTROLLER://{ctl}",
            "advertised.listeners": f"PLAINTEXT://{s.kafka_host}:{s.kafka_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            # Dynamic quorum (KIP-853): needs `format --standalone`; static controller.quorum.voters would refuse it.
            "controller.quorum.bootstrap.servers": ctl,
            "log.dirs": str(self.data_dir),
            # One node: every internal topic has exactly one replica.
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # memstream creates its topics explicitly (partitions = key space, see config.partitions).
            "auto.create.topics.enable": "false",
            "num.partitions": str(s.partitions),
            # The log is the source of truth (event sourcing): never expire it.
            "log.retention.ms": "-1",
        }
        head = "# Written by `memstream stack up` on every start; edit memstream/stack/kafka.py instead.\n"
        return head + "".join(f"{k}={v}\n" for k, v in props.items())

    def prepare(self) -> None:
        # 1. Config first: `format` reads log.dirs and the controller listener from it.
        self.config_file.parent.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(self.server_properties())
        # 2. Format the storage once; meta.properties marks a formatted log dir (re-formatting
        #    an existing one would be refused anyway, and would mean a new cluster id).
        if not (self.data_dir / "meta.properties").exists():
            self.data_dir.mkdir(parents=True, exist_ok=True)
            process.run_logged([str(prereqs.java()), "-cp", f"{self.lib}/*", *LOG_FLAGS, "kafka.tools.StorageTool",
                                "format", "--standalone", "-g", "-t", _cluster_id(), "-c", str(self.config_file)],
                               self.log_file, "kafka storage format")

    def argv(self) -> list[str]:
        heap = self.settings.kafka_heap
        return [str(prereqs.java()), f"-Xmx{heap}", f"-Xms{heap}", *JVM_FLAGS, *LOG_FLAGS,
                "-cp", f"{self.lib}/*", "kafka.Kafka", str(self.config_file)]

    def probe(self) -> bool:
        # A TCP check first: cheap, and keeps librdkafka from spinning on a closed port.
        if not process.port_open(self.settings.kafka_host, self.settings.kafka_port):
            return False
        from confluent_kafka.admin import AdminClient   # lazy: `import memstream.stack` stays light
        admin = AdminClient({"bootstrap.servers": self.address, "log_level": 0,   # 0: no connect noise
                             "socket.connection.setup.timeout.ms": 2000})
        try:
            return bool(admin.list_topics(timeout=2).brokers)
        except Exception:       # KafkaException while the broker is still coming up
            return False
