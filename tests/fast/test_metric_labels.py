"""Metric labels without services (adapters/metrics.py): dead-letter reasons and event types become
bounded label values. The counters moving on the real pipeline: tests/test_metrics.py."""
from __future__ import annotations

from adapters import metrics


def test_dead_letter_reasons_become_a_few_kinds():
    """Reasons are free text (they quote keys and user ids); the label must be one of a few kinds."""
    cases = {
        "extractor crashed 3 times with this record in flight": "crash_loop",
        "record key b'mallory' is not its envelope's user 'alice'": "bad_key",
        "record has no key (expected the user id 'alice'): …": "bad_key",
        "unknown event turn.recorded v9 (known versions: [1])": "unknown_version",
        "sealed part fails authentication (tampered, or moved from another event)": "unsealable",
        "pgvector-items cannot apply it: DataError: …": "store_rejected",
        "memory-processor cannot process it: KeyError: 'x'": "unprocessable",
        "data.content: String should have at most 32000 characters": "invalid",
    }
    assert {r: metrics.reason_kind(r) for r in cases} == cases


def test_type_labels_come_from_the_contract_only():
    """A poison record's `type` is attacker text: it must not become a label value."""
    assert metrics.peek_type(b'{"id":"x","type":"memory.created","v":1}') == "memory.created"
    assert metrics.peek_type(b'{"id":"x","type":"alice@example.com","v":1}') == "unknown"
    assert metrics.peek_type(b"\x00garbage") == "unknown"
    assert metrics.topic_label("t0123.turns") == "turns"
