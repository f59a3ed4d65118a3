"""The one bounded log reader (adapters/bus.py LogReader) on a scripted consumer: bounds, EOF,
errors, the idle bound, and that the consumer is left unassigned and closed. Also the one retry
policy (adapters/resilience.py Backoff) it and the LLM channel wait with."""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from adapters import bus
from adapters.bus import LogReader, LogReadError, LogReadTimeout, transient_kafka_error
from adapters.resilience import Backoff

T = "ns.memory"


class Msg:
    def __init__(self, topic, partition, offset, err=None, value=b"x"):
        self._t, self._p, self._o, self._e, self._v = topic, partition, offset, err, value

    def topic(self):
        return self._t

    def partition(self):
        return self._p

    def offset(self):
        return self._o

    def error(self):
        return self._e

    def value(self):
        return self._v


def eof(p):
    return Msg(T, p, -1001, KafkaError(KafkaError._PARTITION_EOF))


class FakeConsumer:
    """Hands out scripted consume() results in turn (then nothing); records what it was asked."""

    script: list = []
    marks: dict = {}

    def __init__(self, config):
        self.config = config
        self.script = list(type(self).script)
        self.asked: list[int] = []
        self.assigned, self.paused, self.closed, self.unassigned = [], [], False, 0

    def assign(self, tps):
        self.assigned = [(tp.topic, tp.partition, tp.offset) for tp in tps]

    def consume(self, num_messages, timeout):
        self.asked.append(num_messages)
        return self.script.pop(0) if self.script else []

    def pause(self, tps):
        self.paused += [(tp.topic, tp.partition) for tp in tps]

    def resume(self, tps):
        self.resumed = [(tp.topic, tp.partition) for tp in tps]

    def unassign(self):
        self.unassigned += 1

    def close(self):
        self.closed = True

    def get_watermark_offsets(self, tp, timeout):
        got = self.marks[(tp.topic, tp.partition)]
        if isinstance(got, list):
            got = got.pop(0)
        if isinstance(got, BaseException):
            raise got
        return got

    def list_topics(self, topic, timeout):
        class Meta:
            error = None
            partitions = {p: None for (t, p) in self.marks if t == topic}
        return type("M", (), {"topics": {topic: Meta} if any(t == topic for t, _ in self.marks) else {}})


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(bus, "Consumer", FakeConsumer)
    monkeypatch.setattr(bus.time, "sleep", lambda s: None)
    FakeConsumer.script, FakeConsumer.marks = [], {}
    return FakeConsumer


def offsets(batches):
    return [[(m.partition(), m.offset()) for m in b] for b in batches]


def test_reads_each_span_to_its_end_and_no_further(fake):
    fake.script = [[Msg(T, 0, 3), Msg(T, 1, 0), Msg(T, 0, 4)], [Msg(T, 1, 1), Msg(T, 0, 5), Msg(T, 1, 2)]]
    with LogReader({}, "t") as r:
        got = offsets(r.read({(T, 0): (3, 5), (T, 1): (0, 2)}))
        c = r._consumer
    assert got == [[(0, 3), (1, 0), (0, 4)], [(1, 1)]]     # offset 5 of p0 and 2 of p1 are past the ends
    assert c.assigned == [(T, 0, 3), (T, 1, 0)] and c.resumed == [(T, 0), (T, 1)]   # paused by an earlier read
    assert sorted(c.paused) == [(T, 0), (T, 1)] and c.unassigned == 1 and c.closed
    assert c.asked[0] == 4                                  # never more than is still due
    assert c.config["enable.partition.eof"] is True and c.config["group.id"].startswith("memstream-t-")


def test_a_partition_that_ends_early_is_done_at_its_eof(fake):
    fake.script = [[Msg(T, 0, 0), eof(0)]]
    with LogReader({}) as r:
        assert offsets(r.read({(T, 0): (0, 10)})) == [[(0, 0)]]
        assert r.unfinished == {}


def test_a_fatal_error_names_topic_and_partition(fake):
    fake.script = [[Msg(T, 2, -1, KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))]]
    with LogReader({}) as r, pytest.raises(LogReadError, match=r"ns.memory partition 2.*uthoriz"):
        list(r.read({(T, 2): (0, 5)}))
    assert r._consumer.unassigned == 1 and r._consumer.closed


def test_a_transient_error_is_waited_out(fake, monkeypatch):
    waits = []
    monkeypatch.setattr(bus.time, "sleep", waits.append)
    fake.script = [[Msg(T, 0, -1, KafkaError(KafkaError._TRANSPORT))], [Msg(T, 0, 0)]]
    with LogReader({}, backoff=(0.2, 5.0)) as r:
        assert offsets(r.read({(T, 0): (0, 1)})) == [[(0, 0)]]
    assert len(waits) == 1 and 0.1 <= waits[0] <= 0.2


def test_nothing_for_the_idle_bound_raises_instead_of_hanging(fake):
    with LogReader({}, poll_s=0.0, idle_timeout_s=0.05) as r, pytest.raises(LogReadTimeout, match="ns.memory partition 0"):
        list(r.read({(T, 0): (0, 1)}))


def test_unfinished_says_what_a_stopped_read_left(fake):
    fake.script = [[Msg(T, 0, 0)], [Msg(T, 0, 1)]]
    with LogReader({}) as r:
        for _ in r.read({(T, 0): (0, 5)}):
            break
        assert r.unfinished == {(T, 0): (1, 5)}
        assert list(r.read({})) == [] and r.unfinished == {}


def test_spans_end_at_the_watermark_and_start_where_asked(fake):
    fake.marks = {(T, 0): (0, 10), (T, 1): (4, 6), (T, 2): (0, 0)}
    with LogReader({}) as r:
        assert r.spans([T]) == {(T, 0): (0, 10), (T, 1): (0, 6)}        # an empty partition has no span
        assert r.spans([T], last=3) == {(T, 0): (7, 10), (T, 1): (4, 6)}
        assert r.spans(["other"]) == {}


def test_watermarks_wait_out_a_partition_without_a_leader(fake):
    fake.marks = {(T, 0): [KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE)), (0, 3)],
                  (T, 1): [KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))]}
    with LogReader({}) as r:
        assert r.watermarks((T, 0)) == (0, 3)
        with pytest.raises(LogReadError, match="ns.memory partition 1"):
            r.watermarks((T, 1))


@pytest.mark.parametrize("code, transient", [
    (KafkaError._TRANSPORT, True), (KafkaError._ALL_BROKERS_DOWN, True), (KafkaError.LEADER_NOT_AVAILABLE, True),
    (KafkaError.NOT_LEADER_FOR_PARTITION, True), (KafkaError.TOPIC_AUTHORIZATION_FAILED, False),
    (KafkaError._UNKNOWN_TOPIC, False)])
def test_which_kafka_errors_are_waited_out(code, transient):
    assert transient_kafka_error(KafkaError(code)) is transient


def test_the_one_backoff_policy():
    b = Backoff(base=0.5, cap=3.0)
    for attempt, full in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 3.0), (9, 3.0)]:
        for _ in range(50):
            assert full / 2 <= b.delay(attempt) <= full
    assert [round(b.next() * 0) for _ in range(3)] == [0, 0, 0] and b.attempt == 3
    b.reset()
    assert b.attempt == 0


def test_the_llm_channel_waits_with_the_one_policy():
    from streams.llm_channel import LlmClient
    llm = LlmClient("http://127.0.0.1:9/v1", "m", backoff_s=0.4, backoff_max_s=1.0)
    assert isinstance(llm._policy, Backoff)
    assert all(0.2 <= llm._backoff(1) <= 0.4 and 0.5 <= llm._backoff(3) <= 1.0 for _ in range(50))
