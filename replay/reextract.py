"""Re-extraction: repair lost extractor output from the log (`memstream replay reextract --from TIME`).

If the extractor ever lost output (a bug, a topic restored from a backup, an operator's mistake),
the turns are still in the turns topic and the offline channel is deterministic: the same turn
gives the same facts with the same ids (derived from the turn's id). So:

1. read the turns appended since TIME (log time: Kafka's timestamps, i.e. when they were
   published — "repair what happened since the outage"), to the topic's current end;
2. read the ids of the facts appended since TIME (a turn's facts can only come after it);
3. run the offline channel (streams/extraction_core.py's RuleExtractor, the extractor's own
   code) over the readable user turns, in batches;
4. publish only the facts whose ids are not in the facts topic, keyed by user, and wait for
   their delivery. A second run finds them all present and publishes nothing.

Only missing facts are published, never a second copy: the memory processor absorbs a repeat only
within its applied window, and an old fact seen again would be decided anew (reinforcement).
Unreadable turns (already dead-lettered by the extractor) and turns of erased users are skipped.
The LLM channel is not re-run: its answers are not deterministic.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime

import orjson

from adapters.bus import EventProducer
from kernel.config import Settings
from kernel.errors import InvalidEvent
from adapters.kafka_auth import ADMIN, kafka_config
from replay.engine import reader
from schemas.codec import KeyRing, encode
from schemas.records import decode_confluent

BATCH = 64


@dataclass
class ReextractReport:
    turns: int = 0            # records read from the turns topic
    unreadable: int = 0       # could not be decoded (the extractor dead-lettered them)
    user_turns: int = 0       # readable user turns of users not erased
    facts: int = 0            # facts the offline channel derives from them
    present: int = 0          # … already in the facts topic
    missing: int = 0          # … not in it
    published: int = 0        # … published now (0 with dry_run)
    dry_run: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


def _scan(settings: Settings, topic: str, since: datetime | None):
    """Every record of `topic` appended at or after `since` (all of it for None), up to its end now."""
    with reader(kafka_config(settings, ADMIN), "reextract") as r:
        yield from r.records(r.spans([topic], since_ms=None if since is None else int(since.timestamp() * 1000)))


def _fact_ids(settings: Settings, since: datetime | None) -> set[str]:
    ids = set()
    for m in _scan(settings, settings.topic("facts"), since):
        if not m.value():
            continue        # a source watermark
        try:
            env = orjson.loads(m.value())
        except orjson.JSONDecodeError:
            continue
        if isinstance(env, dict) and isinstance(env.get("id"), str):
            ids.add(env["id"])
    return ids


def reextract(settings: Settings, since: datetime | None, *, keys: KeyRing, embedder=None,
              dry_run: bool = False) -> ReextractReport:
    from adapters.embedding import make_embedder
    from streams.extraction_core import ReplyContexts, RuleExtractor
    report = ReextractReport(dry_run=dry_run)
    present_ids = _fact_ids(settings, since)
    core = RuleExtractor(embedder or make_embedder(settings))
    contexts = ReplyContexts()            # the turns in log order, as the live extractor met them
    replies: dict[str, str | None] = {}
    producer = None if dry_run else EventProducer(settings, ADMIN)
    batch: list = []

    def flush_batch() -> None:
        for fact in core.events_for(batch, replies):
            report.facts += 1
            if fact.id in present_ids:
                report.present += 1
                continue
            report.missing += 1
            if producer is not None:
                producer.send(settings.topic("facts"), fact.user, encode(fact, keys))
                report.published += 1
        batch.clear()
        replies.clear()

    try:
        for m in _scan(settings, settings.topic("turns"), since):
            report.turns += 1
            if not m.value():
                continue
            try:
                env = decode_confluent(m, keys, settings.max_future_skew_s)
            except InvalidEvent:
                report.unreadable += 1
                continue
            if env.erased:
                continue
            if (question := contexts.observe((m.partition(), m.offset()), env)) is not None:
                replies[env.id] = question
            if env.type != "turn.recorded" or env.data.role != "user":
                continue
            report.user_turns += 1
            batch.append(env)
            if len(batch) >= BATCH:
                flush_batch()
        if batch:
            flush_batch()
        if producer is not None:
            producer.flush(timeout=120)
    finally:
        if producer is not None:
            producer.close()
    return report
