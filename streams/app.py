"""Shared wiring for the faust apps: one app (= one consumer group) per processor.

Failure semantics of every agent (adapters/resilience.py; `Guard` below):
- poison (a record that cannot be decoded or validated, whose key is not its envelope's user, or
  that a step rejects as invalid): dead-lettered with reason and position; the stream goes on.
- transient (the key store's Postgres, the broker): the same record (or batch) is retried in
  place with capped exponential backoff and jitter — the agent holds its position, nothing after
  it is acked, the worker's health says `waiting` and why.
- anything else: logged, then the process exits at once (os._exit(70)), so faust cannot ack the
  batch in flight (take_events acks in a `finally`, even when the body raised) and commit offsets
  past unprocessed records; the supervisor restarts the worker from its committed offsets.

Offsets vs. sends: faust (0.15.x, not transactional here) flushes its producer before every
offset commit, and an event is acked only after the agent's body for it returned, so whatever a
record caused is sent before its offset can be committed. The extractors additionally await the
delivery of every fact and watermark of a batch before taking the next (a failed delivery is then
retried, not silently dropped). Kafka transactions (faust's processing_guarantee="exactly_once")
are not used: faust marks them experimental. faust's own offset bookkeeping can commit over a
record it skipped around a rebalance (#596 with #606's off-by-one): streams/faust_adapter.py
refuses such commits and re-reads the skipped record. Every stage's output has deterministic ids,
so a re-read emits identical events that the projectors' upserts and the memory processor's
applied window absorb.

faust itself is used here through its public API only; every workaround of a faust behaviour
(the offset guard above, a commit that stalls, table options, table sizes, message timestamps)
is in streams/faust_adapter.py, for the faust versions pinned in pyproject.toml.
"""
from __future__ import annotations

import asyncio
import logging
import os
import sys

import faust

from adapters import metrics, resilience, topology
from adapters.crash_ledger import CrashLedger, ledger_path
from adapters.kafka_auth import WORKER, faust_credentials, kafka_config
from adapters.bus import dead_letter_key, dead_letter_record
from kernel.config import Settings
from kernel.errors import ConfigError, InvalidEvent, UserErased
from adapters.resilience import DROPPED, POISON, TRANSIENT, Backoff, classify
from schemas.codec import KeyRing, encode
from schemas.records import decode_record
from streams import faust_adapter

log = logging.getLogger("memstream.streams")


def make_app(name: str, settings: Settings) -> faust.App:
    datadir = settings.stack_dir / "faust" / settings.namespace / settings.worker_label(name)   # a copy's own
    _check_writable(datadir)
    app = faust.App(
        f"{settings.namespace}.{name}",
        broker=[f"kafka://{addr}" for addr in settings.kafka_addresses],
        broker_credentials=faust_credentials(settings, WORKER),   # SASL/SCRAM, the pipeline's principal
        key_serializer="raw",
        value_serializer="raw",
        web_enabled=False,
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.kafka_replication_factor,   # changelogs: as durable as the log
        store=f"{settings.state_store}://",   # memory: rebuilt from the changelog; rocksdb: on disk (state_table)
        producer_acks=-1,
        producer_linger=0.002,
        broker_commit_interval=0.5,
        # A worker killed with SIGKILL leaves the group only when its session times out; faust's
        # 60 s default kept its partitions unprocessed that long after the supervisor's restart.
        broker_session_timeout=15.0,
        broker_heartbeat_interval=3.0,
        consumer_auto_offset_reset="earliest",
        datadir=str(datadir),
    )
    # faust can skip a record around a rebalance and commit over it: streams/faust_adapter.py
    faust_adapter.attach(app, name, kafka_config(settings, WORKER), commit_stall_s=settings.commit_stall_s,
                        on_stall=lambda s: fatal(name, TimeoutError(f"offset commit stalled for {s:.0f} s")))
    return app


def _check_writable(datadir) -> None:
    """The state directory must take files: RocksDB failing to open a store deep inside faust's
    start surfaced as "Event loop is closed", with no path; this names it before anything starts."""
    try:
        datadir.mkdir(parents=True, exist_ok=True)
        probe = datadir / f".writable.{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"the stream processor's state directory {datadir} is not writable ({exc.strerror or exc}): "
                          "fix its owner or permissions, or point MEMSTREAM_STACK_DIR elsewhere") from None


def changelog_configs(settings: Settings) -> dict[str, str]:
    """Topic configs of every state changelog (adapters/topology.py says why these)."""
    return topology.changelog_config(settings)


# RocksDB per table partition (3 tables x MEMSTREAM_PARTITIONS stores in one memory worker), sized
# for a worker among other services on a small machine: faust's defaults (a 2 GiB block cache and
# 3 x 64 MiB write buffers, each per store) would let the on-disk store use more memory than the
# in-memory one. Here at most ~4 MiB a store. Values are sealed (incompressible).
ROCKSDB_OPTIONS = {"driver": "rocksdict", "write_buffer_size": 1 << 20, "max_write_buffer_number": 2,
                   "block_cache_size": 2 << 20, "target_file_size_base": 8 << 20, "max_open_files": 256}


def state_table(app: faust.App, settings: Settings, name: str):
    """A changelog-backed table of raw bytes (values sealed by the caller), compaction configured,
    kept where Settings.state_store says."""
    options = faust_adapter.table_options(ROCKSDB_OPTIONS if settings.state_store == "rocksdb" else None)
    return app.Table(name, default=None, partitions=settings.partitions, key_type=bytes, value_type=bytes,
                     extra_topic_configs=changelog_configs(settings), options=options)


def report_table_sizes(app: faust.App, component: str, every: float = 15.0) -> None:
    """Every `every` seconds, each state table's keys and value bytes into the worker's health:
    state is what a faust worker's memory should track, so a soak can tell a growing state
    (more users, fuller windows) from a leak (RSS growing at a flat state)."""
    @app.timer(every)
    async def sizes() -> None:
        if resilience.CURRENT is None:
            return
        tables = {name: faust_adapter.table_size(table) for name, table in app.tables.items()}
        resilience.CURRENT.update(component, tables=tables)


def raw_topic(app: faust.App, name: str):
    return app.topic(name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")


class DeadLetters:
    """Routes records a processor cannot read to the dead-letter topic, and counts them."""

    def __init__(self, app: faust.App, settings: Settings, consumer: str, keys: KeyRing):
        self.topic = raw_topic(app, settings.topic("deadletter"))
        self.consumer = consumer
        self.component = consumer   # the health component that reports the count (Guard sets its own)
        self.keys = keys

    @property
    def count(self) -> int:
        """Dead letters this process sent for this consumer: the metric's own counter, so the health
        file and /metrics can never disagree (they did: 0 in health beside 6 in the metric)."""
        return metrics.dead_letters_total(self.consumer)

    async def send(self, event, exc: BaseException) -> None:
        """Dead-letter one record and wait until the dead letter is delivered (an oversized or
        key-less record keeps only its digest: adapters/bus.py)."""
        msg = event.message
        reason = exc.reason if isinstance(exc, InvalidEvent) else f"{self.consumer} cannot process it: {type(exc).__name__}: {exc}"
        log.warning("dead-letter %s:%s:%s (%s): %s", msg.topic, msg.partition, msg.offset, self.consumer, reason[:300])
        fut = await self.topic.send(key=dead_letter_key(msg.key).encode(), value=dead_letter_record(
            self.keys, reason=reason, topic=msg.topic, partition=msg.partition, offset=msg.offset,
            consumer=self.consumer, key=msg.key, raw=msg.value))
        await fut
        metrics.dead_lettered(self.consumer, reason)
        if resilience.CURRENT is not None:
            resilience.CURRENT.update(self.component, dead_lettered=self.count)


class CrashLooped(InvalidEvent):
    """A record that every process that took it died on: poison by its effect, not its bytes."""


def fatal(component: str, exc: BaseException) -> None:
    """An unexpected error: log it and leave now, before faust acks anything in flight."""
    log.critical("%s: fatal %s: %s; exiting for the supervisor to restart from committed offsets",
                 component, type(exc).__name__, exc, exc_info=exc)
    for handler in logging.getLogger().handlers:
        try:
            handler.flush()
        except Exception:  # noqa: BLE001
            pass
    sys.stderr.flush()
    os._exit(70)


def position(event) -> tuple[str, int, int]:
    msg = event.message
    return msg.topic, msg.partition, msg.offset


class Guard:
    """Runs one unit of an agent's work (a record, or a batch) under the failure semantics above.

    With a crash ledger (adapters/crash_ledger.py), `units` marks each unit in flight and takes a
    batch apart where the last process died; `crash_looped` dead-letters a record that has killed
    the worker `crash_loop_limit` times, so its partition moves on.
    """

    def __init__(self, component: str, dead: DeadLetters | None = None, settings: Settings | None = None):
        self.component = component
        self.dead = dead
        if dead is not None:
            dead.component = component
        self.retries = 0
        self.waiting = False
        self.dropped_erased = 0   # events of users erased after they were read (resilience.DROPPED)
        self.ledger = (CrashLedger(ledger_path(settings, component), settings.crash_loop_limit).load()
                       if settings is not None else None)

    def units(self, events: list) -> list[list]:
        return self.ledger.units(events, position) if self.ledger is not None else [events]

    async def begin(self, unit: list) -> bool:
        """Mark `unit` in flight; False (after dead-lettering it) for a record that keeps killing us."""
        if self.ledger is None:
            return True
        reason = self.ledger.give_up(position(unit[0]), self.component) if len(unit) == 1 else None
        if reason is not None:
            log.error("%s: %s:%s:%s %s; dead-lettering it", self.component, *position(unit[0]), reason)
            if self.dead is not None:
                await self.run(lambda: self.dead.send(unit[0], CrashLooped(reason)))
            return False
        self.ledger.begin([position(e) for e in unit])
        return True

    def done(self) -> None:
        if self.ledger is not None:
            self.ledger.done()

    def _health(self, state: str, **info) -> None:
        metrics.health_state(self.component, state)
        if resilience.CURRENT is not None:
            resilience.CURRENT.set(self.component, state, retries=self.retries,
                                   dead_lettered=self.dead.count if self.dead else 0, **info)

    async def run(self, work, event=None) -> bool:
        """await work() until it succeeds (True); a poison error dead-letters `event` (False)."""
        backoff = Backoff()
        while True:
            try:
                await work()
                if self.waiting:
                    self.waiting = False
                    log.info("%s: recovered after %d retries", self.component, backoff.attempt)
                    self._health("running")
                return True
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - classified
                kind = classify(exc)
                if kind == DROPPED:
                    self.dropped_erased += 1
                    log.info("%s: dropped an event of an erased user (%d so far)", self.component, self.dropped_erased)
                    if resilience.CURRENT is not None:
                        resilience.CURRENT.update(self.component, dropped_erased=self.dropped_erased)
                    return False
                if kind == POISON:
                    if event is not None and self.dead is not None:
                        await self.run(lambda err=exc: self.dead.send(event, err))
                    else:
                        log.warning("%s: skipped a record it cannot use: %s", self.component, exc)
                    return False
                if kind != TRANSIENT:
                    fatal(self.component, exc)
                self.retries += 1
                self.waiting = True
                delay = backoff.next()
                # The whole message on one line: a multi-line error (faust's partition mismatch) cut
                # to its first line hid its cause from the operator.
                why = resilience.one_line(exc)
                log.warning("%s: transient failure, retrying in %.1fs (attempt %d): %s", self.component, delay,
                            backoff.attempt, why[:1000])
                self._health("waiting", reason=why[:500])
                await asyncio.sleep(delay)


def encode_or_drop(env, keys: KeyRing, guard: Guard) -> bytes | None:
    """The record for `env`, or None (counted) when its user was erased after the input was read:
    one erased user must not hold back the other users' events of the same batch."""
    try:
        return encode(env, keys)
    except UserErased:
        _count_dropped(guard, env)
        return None


def _count_dropped(guard: Guard, env) -> None:
    """Count an event of an erased user that this stage dropped (health: `dropped_erased`)."""
    guard.dropped_erased += 1
    log.info("%s: dropped a %s of an erased user (%d so far)", guard.component, env.type, guard.dropped_erased)
    if resilience.CURRENT is not None:
        resilience.CURRENT.update(guard.component, dropped_erased=guard.dropped_erased)


def decode_keyed(msg, keys: KeyRing, max_future_skew_s: float):
    """Decode a faust record through the one decode path (schemas/records.py: its key is its
    envelope's user, its time in range of the broker's append time); InvalidEvent otherwise."""
    return decode_record(msg.key, msg.value, keys, appended_ms=faust_adapter.appended_ms(msg),
                         max_future_skew_s=max_future_skew_s)


async def user_turns(batch, keys: KeyRing, dead: DeadLetters, max_future_skew_s: float,
                     guard: Guard | None = None, stated: bool = False, seen=None) -> list:
    """The readable user turns of a batch, in order; unreadable records go to dead letters.
    `stated`: memory.stated records too (the offline extractor keeps them as stated; the LLM
    channel has nothing to extract from them).

    Only what the user says about themselves is extracted, so assistant/system/tool turns and
    turns of erased users are skipped (their positions still advance with the batch). A key store
    that does not answer is waited for (guard), never taken as "unreadable". `seen(position,
    envelope)`, when given, is called with every readable record first, assistant turns included
    ((partition, offset): the offline extractor's reply contexts).
    """
    guard = guard or Guard(dead.consumer, dead)
    out = []
    for event in batch:
        metrics.consumed(dead.consumer, event.message.topic, event.message.value)
        got: list = []

        async def one(event=event, got=got) -> None:
            got.clear()
            got.append(decode_keyed(event.message, keys, max_future_skew_s))
        if not await guard.run(one, event):
            continue
        env = got[0]
        if env.erased:
            _count_dropped(guard, env)   # an erased user's turn: unreadable, nothing to extract
            continue
        if seen is not None:
            seen((event.message.partition, event.message.offset), env)
        if (env.type == "turn.recorded" and env.data.role == "user") or (stated and env.type == "memory.stated"):
            out.append(env)
    return out
