"""The error taxonomy every consumer applies (adapters/resilience.py), on real exception types."""
from __future__ import annotations

import psycopg
import pytest
from aiokafka import errors as ak
from confluent_kafka import KafkaError, KafkaException
from faust.exceptions import PartitionsMismatch
from neo4j import exceptions as nx

from kernel.errors import InvalidEvent, MemstreamError
from adapters.resilience import FATAL, POISON, TRANSIENT, Unavailable, classify


@pytest.mark.parametrize("exc, kind", [
    (InvalidEvent("bad base64"), POISON),
    (psycopg.DataError("invalid byte sequence"), POISON),
    (KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)), POISON),
    (Unavailable("key store"), TRANSIENT),
    (psycopg.OperationalError("the connection is closed"), TRANSIENT),
    (nx.ServiceUnavailable("neo4j away"), TRANSIENT),
    (KafkaException(KafkaError(KafkaError._ALL_BROKERS_DOWN)), TRANSIENT),
    (ak.KafkaConnectionError("broker away"), TRANSIENT),            # faust's client, broker down
    (ak.KafkaTimeoutError(), TRANSIENT),                            # faust's send timed out
    (ak.NotLeaderForPartitionError(), TRANSIENT),                   # leadership moving
    (MemstreamError("3 records undelivered: _MSG_TIMED_OUT"), TRANSIENT),
    (PartitionsMismatch("changelog topic 'x' has 0 partitions"), TRANSIENT),  # just created, metadata behind
    (PartitionsMismatch("changelog topic 'x' has 6 partitions"), FATAL),     # a real mismatch
    (ak.ProducerClosed(), FATAL),                                   # our own state is wrong
    (RuntimeError("a bug"), FATAL),
    (KeyError("x"), FATAL),
])
def test_each_error_has_its_kind(exc, kind):
    assert classify(exc) == kind
