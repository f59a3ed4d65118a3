"""Kafka 4.x in KRaft mode, run from Maven Central jars: one node (broker + controller in one
JVM) by default, or a cluster of N such nodes (`memstream stack up --brokers 3`).

A cluster's nodes are all controller voters (a static quorum: 3 nodes keep a majority with one
down) and brokers; node k listens 100·(k-1) ports above node 1 (Settings.kafka_node_ports).
Topics get 3 replicas and min.insync.replicas 2 there (Settings.kafka_replication_factor)."""
from __future__ import annotations

import base64
import os
import socket
import time
import uuid
from pathlib import Path

from adapters import kafka_auth
from kernel.errors import StackError
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
    """Node `node` (1-based) of the stack's Kafka. Node 1 keeps the single-node stack's names
    (service `kafka`, kafka/server.properties, data/kafka), so a stack made before clusters is node 1."""

    def __init__(self, settings, node: int = 1):
        super().__init__(settings)
        self.node = node
        self.size = settings.kafka_cluster_size
        self.name = "kafka" if node == 1 else f"kafka-{node}"
        self.port, self.controller_port = settings.kafka_node_ports(node)

    @property
    def lib(self) -> Path:
        return self.layout.lib / "kafka"

    @property
    def config_file(self) -> Path:
        return self.layout.root / "kafka" / ("server.properties" if self.node == 1 else f"server-{self.node}.properties")

    @property
    def data_dir(self) -> Path:
        return self.layout.data / self.name

    @property
    def size_file(self) -> Path:
        """How many nodes this stack's Kafka was formatted with (Settings.kafka_cluster_size reads it)."""
        return self.layout.root / "kafka" / "brokers"

    @property
    def address(self) -> str:
        return f"{self.settings.kafka_host}:{self.port}"

    def ports(self) -> list[tuple[str, int]]:
        s = self.settings
        return [(s.kafka_host, self.port), (s.kafka_host, self.controller_port)]

    def markers(self) -> list[str]:
        return ["kafka.Kafka", str(self.config_file)]

    @property
    def scram_marker(self) -> Path:
        """The fingerprint of the SCRAM users the broker's metadata holds, written once they were
        created (format or migration). In the log dir, so it travels (or goes) with the data a
        copy or a wipe takes; Kafka reads only the directories and its own files there."""
        return self.data_dir / ".memstream-scram"

    def server_properties(self, migrate_port: int | None = None) -> str:
        """The broker's config. Security (adapters/kafka_auth.py):
        - clients: listener CLIENT, SASL_PLAINTEXT with SCRAM-SHA-512. No TLS: it listens on the
          loopback interface only (kafka_host, 127.0.0.1 by default), where nothing can sniff it;
          a broker reachable over a network would need SASL_SSL instead.
        - controller: listener CONTROLLER, internal (the broker talks to its own controller), SASL
          PLAIN with a static JAAS user (SCRAM users live in the metadata log, which a controller
          must read before it could check them), so no anonymous connection reaches controller APIs.
        - every request is authorized by KRaft's StandardAuthorizer; nothing is allowed without an
          ACL; memstream-admin is the super user (also the inter-broker and controller principal).
        migrate_port: one start with an extra PLAINTEXT listener on the loopback interface whose
        anonymous user is a super user, used only to create the SCRAM users of a log dir formatted
        before SASL (see _migrate); never in a normal start."""
        s = self.settings
        ctl = f"{s.kafka_host}:{self.controller_port}"
        admin, pw = kafka_auth.username(kafka_auth.ADMIN), kafka_auth.password(s, kafka_auth.ADMIN)
        listeners = f"CLIENT://{s.kafka_host}:{self.port},CONTROLLER://{ctl}"
        advertised = f"CLIENT://{s.kafka_host}:{self.port}"
        protocols = "CLIENT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"
        super_users = f"User:{admin}"
        inter_broker = "CLIENT"
        if migrate_port is not None:
            listeners += f",MIGRATE://127.0.0.1:{migrate_port}"
            advertised += f",MIGRATE://127.0.0.1:{migrate_port}"
            protocols += ",MIGRATE:PLAINTEXT"
            super_users += ";User:ANONYMOUS"
            inter_broker = "MIGRATE"        # the SCRAM user it would log in as does not exist yet
        if self.size == 1:
            # Dynamic quorum (KIP-853): needs `format --standalone`; static controller.quorum.voters would refuse it.
            quorum = {"controller.quorum.bootstrap.servers": ctl}
        else:
            # A static quorum of every node: formatted alike, no node has to add the others first.
            quorum = {"controller.quorum.voters": ",".join(
                f"{k}@{s.kafka_host}:{s.kafka_node_ports(k)[1]}" for k in range(1, self.size + 1))}
        rf, min_isr = str(s.kafka_replication_factor), str(s.kafka_min_insync)
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node),
            "listeners": listeners,
            "advertised.listeners": advertised,
            "listener.security.protocol.map": protocols,
            "inter.broker.listener.name": inter_broker,
            "controller.listener.names": "CONTROLLER",
            **quorum,
            # -- authentication --
            "sasl.enabled.mechanisms": kafka_auth.MECHANISM,
            "listener.name.client.sasl.enabled.mechanisms": kafka_auth.MECHANISM,
            "sasl.mechanism.inter.broker.protocol": kafka_auth.MECHANISM,
            "listener.name.client.scram-sha-512.sasl.jaas.config":
                f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{admin}" password="{pw}";',
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config":
                f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{admin}" password="{pw}" '
                f'user_{admin}="{pw}";',
            # -- authorization --
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": super_users,
            "log.dirs": str(self.data_dir),
            # Internal topics (committed offsets above all) as durable as memstream's own: one
            # replica on a single node; on a cluster 3, of which an acks=all write needs 2.
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": min_isr,
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": min_isr,
            "default.replication.factor": rf,
            "min.insync.replicas": min_isr,
            "group.initial.rebalance.delay.ms": "0",
            # memstream creates its topics explicitly (partitions = key space, see config.partitions).
            "auto.create.topics.enable": "false",
            "num.partitions": str(s.partitions),
            # The log is the source of truth (event sourcing): never expire it.
            "log.retention.ms": "-1",
        }
        head = ("# Written by `memstream stack up` on every start; edit memstream/stack/kafka.py instead.\n"
                "# Holds the admin password (JAAS): mode 0600.\n")
        return head + "".join(f"{k}={v}\n" for k, v in props.items())

    def _write_config(self, path: Path, text: str) -> None:
        """0600 from the start: the file carries the admin password."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        path.chmod(0o600)                   # a file left by an older version was 0644

    def _storage_tool(self, *args: str, what: str) -> None:
        process.run_logged([str(prereqs.java()), "-cp", f"{self.lib}/*", *LOG_FLAGS, "kafka.tools.StorageTool", *args],
                           self.log_file, what)

    def _check_size(self) -> None:
        """A stack's node count is fixed by its format: its topics' replicas were placed for it,
        and a static quorum cannot grow by a changed setting."""
        try:
            recorded = int(self.size_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            # None recorded: a stack made before clusters has one node (if it has a log at all)
            recorded = 1 if (self.layout.data / "kafka" / "meta.properties").exists() else None
        if recorded is not None and recorded != self.size:
            raise StackError(f"this stack's Kafka was created with {recorded} broker(s), not {self.size}: "
                             f"use another stack dir (MEMSTREAM_STACK_DIR) for a cluster of another size")
        if recorded is None:
            self.size_file.parent.mkdir(parents=True, exist_ok=True)
            self.size_file.write_text(f"{self.size}\n")

    def prepare(self) -> None:
        s = self.settings
        kafka_auth.ensure_passwords(s)
        self._check_size()
        # 1. Config first: `format` reads log.dirs and the controller listener from it.
        self._write_config(self.config_file, self.server_properties())
        # 2. Format the storage once; meta.properties marks a formatted log dir (re-formatting
        #    an existing one would be refused anyway, and would mean a new cluster id). The SCRAM
        #    users go into the new cluster's bootstrap metadata (the passwords appear in the
        #    formatter's argv for the second it runs: same user only on /proc of a hardened host).
        if not (self.data_dir / "meta.properties").exists():
            self.data_dir.mkdir(parents=True, exist_ok=True)
            scram = []
            for p in kafka_auth.PRINCIPALS:
                scram += ["--add-scram", f"{kafka_auth.MECHANISM}=[name={kafka_auth.username(p)},"
                                         f"password={kafka_auth.password(s, p)},iterations={kafka_auth.SCRAM_ITERATIONS}]"]
            # One cluster id for every node of the stack (a node formatted with another is refused
            # by the others); a static quorum needs no --standalone.
            quorum = ["--standalone"] if self.size == 1 else []
            self._storage_tool("format", *quorum, "-g", "-t", self._cluster_id(), "-c", str(self.config_file), *scram,
                               what=f"{self.name} storage format")
            self.scram_marker.write_text(kafka_auth.fingerprint(s) + "\n")
        # 3. A log dir formatted before SASL (or whose passwords changed since): create or update
        #    the SCRAM users in place, then start normally. Idempotent; the data stays.
        elif not self.scram_current():
            if self.size > 1:   # one node alone has no quorum to start with
                raise StackError(f"{self.name}: the Kafka passwords changed since this cluster was formatted; "
                                 f"a cluster's SCRAM users cannot be migrated in place: use a new stack dir")
            self._migrate()

    def _cluster_id(self) -> str:
        """The stack's cluster id: new for a single node; for a cluster, made once and shared."""
        if self.size == 1:
            return _cluster_id()
        path = self.layout.root / "kafka" / "cluster.id"
        if not path.exists():
            path.write_text(_cluster_id() + "\n")
        return path.read_text().strip()

    def scram_current(self) -> bool:
        try:
            return self.scram_marker.read_text().strip() == kafka_auth.fingerprint(self.settings)
        except FileNotFoundError:
            return False

    def outdated(self) -> bool:
        """A running broker started by an older version (PLAINTEXT, no authorizer) or before its
        SCRAM users were created: `up` restarts it (prepare() then migrates the log dir)."""
        try:
            running = self.config_file.read_text()
        except FileNotFoundError:
            return True
        return "authorizer.class.name" not in running or not self.scram_current()

    def _migrate(self, timeout: float = 300.0) -> None:   # a broker loading thousands of partitions: minutes
        """One start with a temporary anonymous super-user listener on a free loopback port; over
        it the SCRAM users are upserted (AlterUserScramCredentials), then the broker is stopped.
        Nothing else changes in the log dir. The next normal start is the secured one."""
        from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        cfg = self.config_file.with_name("server-migrate.properties")
        self._write_config(cfg, self.server_properties(migrate_port=port))
        heap = self.settings.kafka_heap
        argv = [str(prereqs.java()), f"-Xmx{heap}", f"-Xms{heap}", *JVM_FLAGS, *LOG_FLAGS,
                "-cp", f"{self.lib}/*", "kafka.Kafka", str(cfg)]
        proc = process.spawn("kafka (SCRAM migration)", argv, self.log_file)
        markers = ["kafka.Kafka", str(cfg)]
        try:
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 0,
                                 "socket.connection.setup.timeout.ms": 2000})
            deadline = time.monotonic() + timeout
            info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, kafka_auth.SCRAM_ITERATIONS)
            upserts = [UserScramCredentialUpsertion(kafka_auth.username(p), info, kafka_auth.password(self.settings, p).encode())
                       for p in kafka_auth.PRINCIPALS]
            while True:
                if proc.poll() is not None:
                    raise StackError(f"kafka exited during the SCRAM migration (code {proc.returncode}); see {self.log_file}")
                try:
                    if process.port_open("127.0.0.1", port) and admin.list_topics(timeout=2).brokers:
                        for fut in admin.alter_user_scram_credentials(upserts, request_timeout=10).values():
                            fut.result()
                        break
                except Exception as exc:   # KafkaException while it is still coming up
                    if time.monotonic() > deadline:
                        raise StackError(f"kafka SCRAM migration failed: {exc}; see {self.log_file}") from None
                if time.monotonic() > deadline:
                    raise StackError(f"kafka not ready for the SCRAM migration after {timeout:.0f} s; see {self.log_file}")
                time.sleep(0.5)
            self.scram_marker.write_text(kafka_auth.fingerprint(self.settings) + "\n")
        finally:
            process.terminate(proc.pid, markers, self.stop_signal, self.stop_timeout)
            proc.wait()
            cfg.unlink(missing_ok=True)

    def argv(self) -> list[str]:
        heap = self.settings.kafka_heap
        return [str(prereqs.java()), f"-Xmx{heap}", f"-Xms{heap}", *JVM_FLAGS, *LOG_FLAGS,
                "-cp", f"{self.lib}/*", "kafka.Kafka", str(self.config_file)]

    def probe(self) -> bool:
        # A TCP check first: cheap, and keeps librdkafka from spinning on a closed port.
        if not process.port_open(self.settings.kafka_host, self.port):
            return False
        from confluent_kafka.admin import AdminClient   # lazy: `import memstream.stack` stays light
        admin = AdminClient({**kafka_auth.kafka_config(self.settings, kafka_auth.ADMIN), "log_level": 0,   # 0: no connect noise
                             "bootstrap.servers": self.address, "socket.connection.setup.timeout.ms": 2000})
        try:
            # This node answers and the controller quorum has registered it as a broker.
            return self.node in admin.list_topics(timeout=2).brokers
        except Exception:       # KafkaException while the broker is still coming up
            return False
