"""The session summarizer's core: one decoded turn in, events out, state saved — no faust, no Kafka.

The faust agent (streams/session_summarizer.py) decodes each record of the turns topic, hands the
turn to `SessionCore.on_turn` and sends what comes back; the fast tier drives it over dicts
(tests/fast/test_session_core.py). The state lives in one mapping of bytes to bytes (a faust
table live), every value sealed with the user's data key: per (user, session) the messages not
yet summarised and the rolling summary (domain/sessions.py), and under `user\\x00` the
user's open sessions.

`on_turn` is an async generator of `Outgoing` records, as the memory core's steps are generators:
the driver sends each one before asking for the next, and the state is saved only after the last
one was taken. A crash while sending saves nothing; the re-read turn emits the same events again
(ids derived from the turn), which the projectors and the memory processor absorb.

What a turn can emit, in this order:
  session.summarized  (memory topic) when the session's window overflows by a chunk: the older
                      messages summarised — by the LLM when one is given (streams/llm_channel.py),
                      else, or when it gives no usable answer, extractively;
  fact.extracted      (facts topic, category `episodic`; only with an embedder) one per episode:
                      the chunk just summarised, and each other session of the user that went idle
                      (`session_idle_minutes` of event time) before this turn.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, MutableMapping
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson

from kernel.config import Settings
from domain.sessions import (EPISODE_IMPORTANCE, SessionState, add_turn, as_text, episode_content,
                                      extractive_summary, fold, idle_sessions, last_time, tell, untold)
from adapters.embedding import Embedder
from kernel.ids import derived_id
from schemas.codec import KeyRing, kept_bytes, make_envelope, open_blob, seal_blob
from schemas.envelope import Envelope
from schemas.events import FactExtracted, SessionSummarized
from streams.llm_channel import LlmClient

PRODUCER = "session-summarizer/1"
MEMORY, FACTS = "memory", "facts"


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One record to send: to the memory topic (MEMORY) or the facts topic (FACTS), keyed by user."""
    topic: str
    key: str
    envelope: Envelope


class SessionCore:
    """Per-turn steps of the session summarizer over one key-value state store (bytes → bytes:
    a faust table and a dict both fit). `embedder`: episodes become memories only where one is
    given (they need a vector); `llm`: summaries by the LLM channel, else extractive."""

    def __init__(self, settings: Settings, keys: KeyRing, table: MutableMapping[bytes, bytes],
                 embedder: Embedder | None = None, llm: LlmClient | None = None):
        self.keys = keys
        self.table = table
        self.embedder = embedder
        self.llm = llm
        self.idle_s = settings.session_idle_minutes * 60.0
        self.window = 2 * settings.short_term_turns
        self.chunk = settings.session_summary_chunk
        self.summary_chars = settings.session_summary_chars

    # -- state ------------------------------------------------------------------------------

    def load(self, user: str, session: str) -> SessionState | None:
        """The session's state (fresh when none); None when it exists but is unreadable (erased)."""
        blob = self.table.get(f"{user}\x00{session}".encode())
        if blob is None:
            return SessionState()
        opened = open_blob(self.keys, user, f"session:{user}:{session}", orjson.loads(blob))
        return None if opened is None else SessionState.from_dict(orjson.loads(opened))

    def save(self, user: str, session: str, state: SessionState) -> None:
        sealed = seal_blob(self.keys, user, f"session:{user}:{session}", orjson.dumps(state.to_dict()))
        self.table[f"{user}\x00{session}".encode()] = kept_bytes(orjson.dumps(sealed))

    def load_open(self, user: str) -> list[str]:
        """The user's open sessions (session ids are never empty, so `user\\x00` is free for this).
        Only their names: each one's last message time is in its own state, so the index is
        rewritten when a session opens or closes, not on every turn."""
        blob = self.table.get(f"{user}\x00".encode())
        opened = None if blob is None else open_blob(self.keys, user, f"sessions:{user}", orjson.loads(blob))
        return [] if opened is None else list(orjson.loads(opened))

    def save_open(self, user: str, sessions: list[str]) -> None:
        sealed = seal_blob(self.keys, user, f"sessions:{user}", orjson.dumps(sessions))
        self.table[f"{user}\x00".encode()] = kept_bytes(orjson.dumps(sealed))

    def drop_user(self, user: str) -> None:
        """Erasure: every session state of the user goes (a scan; erasures are rare)."""
        prefix = f"{user}\x00".encode()
        for key in [k for k in list(self.table.keys()) if k.startswith(prefix)]:
            self.table.pop(key, None)

    # -- the steps' parts -------------------------------------------------------------------

    async def summarize(self, previous: str | None, older: list[list]) -> tuple[str, str, str | None]:
        """(summary, channel, model) of `older` folded into `previous`."""
        if self.llm is not None:
            answer = await self.llm.summarize(as_text(previous, older), self.summary_chars)
            if answer:
                return answer, "llm", self.llm.model
        return extractive_summary(previous, older, self.summary_chars), "rule", None

    async def episodes(self, turn: Envelope, told: list[tuple[str, SessionState, list[list]]]) -> list[Envelope]:
        """Fact events for the episodes of `told` ((session, its state, the messages)); the
        states record what they now cover. Embedded at once, off the event loop."""
        embedder = self.embedder
        assert embedder is not None
        drafts = []
        for session, state, messages in told:
            day = datetime.fromtimestamp(messages[-1][0], UTC).date().isoformat()
            content = episode_content(day, messages, self.summary_chars)
            n = tell(state, messages)
            if content:
                drafts.append((session, n, content, day))
        if not drafts:
            return []
        vectors = await asyncio.get_running_loop().run_in_executor(None, embedder.passages, [d[2] for d in drafts])
        out = []
        for (session, n, content, day), vector in zip(drafts, vectors):
            fact_id = derived_id(turn.id, f"episode:{session}:{n}")
            data = FactExtracted(fact_id=fact_id, source_turn=turn.id, session=session, channel="rule",
                                 rule="session.episode", content=content, category="episodic",
                                 importance=EPISODE_IMPORTANCE, event_date=day, embedding=vector,
                                 embed_model=embedder.model)
            out.append(make_envelope(data, user=turn.user, time=turn.time, id=fact_id, causation=turn.id,
                                     correlation=turn.correlation or turn.id, producer=PRODUCER))
        return out

    # -- the step ---------------------------------------------------------------------------

    async def on_turn(self, turn: Envelope) -> AsyncIterator[Outgoing]:
        """One decoded event of the turns topic."""
        if turn.erased or turn.type != "turn.recorded":
            return
        user, session, at = turn.user, turn.data.session, turn.time.timestamp()
        state = self.load(user, session)
        if state is None:
            return
        told: list[tuple[str, SessionState, list[list]]] = []
        # 1. sessions of this user that went idle before this turn: an episode each
        open_sessions = self.load_open(user) if self.embedder is not None else []
        others = {other: self.load(user, other) for other in open_sessions if other != session}
        last = {other: last_time(st) for other, st in others.items() if st is not None}
        closed = idle_sessions(last, session, at, self.idle_s) + [o for o, st in others.items() if st is None]
        for other in closed:
            other_state = others[other]
            if other_state is not None and (rest := untold(other_state, other_state.buf)):
                told.append((other, other_state, rest))
        index = [s for s in open_sessions if s not in closed] + ([] if session in open_sessions else [session])
        older = add_turn(state, turn.id, at, turn.data.role, turn.data.content, self.window, self.chunk)
        if older is not None:
            summary, channel, model = await self.summarize(state.summary, older)
            fold(state, older, summary)
            data = SessionSummarized(session=turn.data.session, summary=summary, summary_version=state.version,
                                     message_count=state.count,
                                     through_time=datetime.fromtimestamp(state.through, UTC),
                                     through_event_id=state.through_id, channel=channel, model=model)
            env = make_envelope(data, user=turn.user, time=turn.time, id=derived_id(turn.id, "session.summarized"),
                                causation=turn.id, correlation=turn.correlation or turn.id, producer=PRODUCER)
            yield Outgoing(MEMORY, turn.user, env)
            # 2. the summarised chunk is an episode too
            if self.embedder is not None and (chunk := untold(state, older)):
                told.append((session, state, chunk))
        # 3. episodes out before any state is saved: a crash in between re-tells them (same ids)
        if self.embedder is not None:
            for fact in await self.episodes(turn, told):
                yield Outgoing(FACTS, user, fact)
        # 4. save: the idle sessions, the open-session index, this session
        for other, other_state, _ in told:
            if other != session:
                self.save(user, other, other_state)
        if self.embedder is not None and index != open_sessions:
            self.save_open(user, index)
        self.save(user, session, state)
