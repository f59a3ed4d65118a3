"""Health files and /metrics count dead letters with one counter (issue 27: the extractor's health
said 0 dead letters while its metrics counted 6). On the real pipeline: poison records into the
turns topic, then the extractor's health file and its /metrics endpoint must agree, and have moved."""
from __future__ import annotations

import uuid

import httpx
import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from adapters.kafka_auth import ADMIN, kafka_config
from adapters.resilience import read_health
from tests.helpers import wait_for

pytestmark = [pytest.mark.stack]


def _dead_in_metrics(port: int) -> int:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return int(sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
                   if s.name == "memstream_dead_letters_total" and s.labels.get("consumer") == "extractor"))


def _dead_in_health(settings) -> int | None:
    return ((read_health(settings).get("extractor") or {}).get("components", {}).get("extractor") or {}).get("dead_lettered")


def test_extractor_health_and_metrics_count_the_same_dead_letters(settings, pipeline):
    port = wait_for(lambda: (read_health(settings).get("extractor") or {}).get("metrics", {}).get("port"),
                    timeout=60, what="the extractor's metrics port")
    before = _dead_in_metrics(port)
    producer = Producer(kafka_config(settings, ADMIN))
    user = f"poison-{uuid.uuid4().hex[:6]}"
    for i in range(3):   # not JSON: poison by its bytes, dead-lettered by the extractor
        producer.produce(settings.topic("turns"), key=user.encode(), value=b"\x00not an event %d" % i)
    assert producer.flush(30) == 0

    def agreed():
        metric = _dead_in_metrics(port)
        return metric >= before + 3 and _dead_in_health(settings) == metric and metric
    wait_for(agreed, timeout=60, interval=0.5, what="health and /metrics to agree on the dead letters")
