"""Session compression: turn.recorded → session.summarized, an agent of the memory processor's app.

It reads the turns topic (co-partitioned with facts and memory: key = user id, so one instance
decides for each user) and keeps per-(user, session) state in its own sealed table: the messages
not yet summarised and the rolling summary (memstream/domain/sessions.py). When the window
overflows by a chunk, the older messages are summarised — through the LLM channel when
MEMSTREAM_LLM_BASE_URL is set (bounded, timed out, retried; see streams/llm_channel.py), else, or
when the LLM gives no usable answer, extractively — and the summary is recorded once in a
`session.summarized` event on the memory topic (id derived from the turn that overflowed the
window). Replay reads that event and never summarises again. The session-windows projector stores it.

Episodes: each summarised chunk, and a session that went idle (the user speaks in another
session `session_idle_minutes` after its last message), becomes a `fact.extracted` of category
`episodic` on the facts topic (memstream/domain/sessions.py decides which messages; the
embedding is computed here, once), so the memory processor keeps what a session was about as a
memory, recallable across sessions. Each user's open sessions are kept in the same table under
the key `user\x00`.

It runs as its own faust agent, so an LLM call holds up summaries, never memory decisions.
"""
from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

import orjson

from memstream import watermarks
from memstream.config import Settings
from memstream.domain.sessions import (EPISODE_IMPORTANCE, SessionState, add_turn, as_text, episode_content,
                                      extractive_summary, fold, idle_sessions, last_time, tell, untold)
from memstream.embedding import Embedder
from memstream.errors import InvalidEvent
from memstream.ids import derived_id
from schemas.codec import KeyRing, encode, kept_bytes, make_envelope, open_blob, seal_blob
from schemas.events import FactExtracted, SessionSummarized
from streams.app import DeadLetters, Guard, decode_keyed, fatal, raw_topic, state_table
from streams.llm_channel import LlmClient

log = logging.getLogger("memstream.sessions")
PRODUCER = "session-summarizer/1"


class SessionSummarizer:
    def __init__(self, table):
        self.table = table

    def drop_user(self, user: str) -> None:
        """Erasure: every session state of the user goes (a scan; erasures are rare)."""
        prefix = f"{user}\x00".encode()
        for key in [k for k in list(self.table.keys()) if k.startswith(prefix)]:
            self.table.pop(key, None)


def attach_session_summarizer(app, settings: Settings, keys: KeyRing, memory_out,
                              embedder: Embedder | None = None) -> SessionSummarizer:
    """`embedder`: episodes become memories only where one is given (they need a vector)."""
    turns = raw_topic(app, settings.topic("turns"))
    facts_out = raw_topic(app, settings.topic("facts"))
    idle_s = settings.session_idle_minutes * 60.0
    table = state_table(app, settings, "session-state")
    window = 2 * settings.short_term_turns
    llm = None
    if settings.llm_base_url:
        llm = LlmClient.from_settings(settings)

    def load(user: str, session: str) -> SessionState | None:
        blob = table.get(f"{user}\x00{session}".encode())
        if blob is None:
            return SessionState()
        opened = open_blob(keys, user, f"session:{user}:{session}", orjson.loads(blob))
        return None if opened is None else SessionState.from_dict(orjson.loads(opened))

    def save(user: str, session: str, state: SessionState) -> None:
        sealed = seal_blob(keys, user, f"session:{user}:{session}", orjson.dumps(state.to_dict()))
        table[f"{user}\x00{session}".encode()] = kept_bytes(orjson.dumps(sealed))

    def load_open(user: str) -> list[str]:
        """The user's open sessions (session ids are never empty, so `user\x00` is free for this).
        Only their names: each one's last message time is in its own state, so the index is
        rewritten when a session opens or closes, not on every turn."""
        blob = table.get(f"{user}\x00".encode())
        opened = None if blob is None else open_blob(keys, user, f"sessions:{user}", orjson.loads(blob))
        return [] if opened is None else list(orjson.loads(opened))

    def save_open(user: str, sessions: list[str]) -> None:
        sealed = seal_blob(keys, user, f"sessions:{user}", orjson.dumps(sessions))
        table[f"{user}\x00".encode()] = kept_bytes(orjson.dumps(sealed))

    async def episodes(turn, told: list[tuple[str, SessionState, list[list]]]) -> list:
        """Fact events for the episodes of `told` ((session, its state, the messages)); the
        states record what they now cover. Embedded at once, off the event loop."""
        drafts = []
        for session, state, messages in told:
            day = datetime.fromtimestamp(messages[-1][0], UTC).date().isoformat()
            content = episode_content(day, messages, settings.session_summary_chars)
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

    async def summarize(previous: str | None, older: list[list]) -> tuple[str, str, str | None]:
        if llm is not None:
            answer = await llm.summarize(as_text(previous, older), settings.session_summary_chars)
            if answer:
                return answer, "llm", llm.model
        return extractive_summary(previous, older, settings.session_summary_chars), "rule", None

    guard = Guard("session-summarizer", DeadLetters(app, settings, "session-summarizer", keys), settings)

    @app.agent(turns)
    async def summarize_sessions(stream):
        async for event in stream.events():
            if not await guard.begin([event]):   # a turn that keeps killing us is dead-lettered
                continue
            # A key store or broker that does not answer is waited for, in place (the state is
            # saved last, so a retry starts over from the same state); anything else exits.
            try:
                await guard.run(lambda event=event: handle(event))
            except Exception as exc:  # noqa: BLE001 - a bug: leave for the supervisor
                fatal("session-summarizer", exc)
            guard.done()

    async def handle(event) -> None:
        msg = event.message
        if watermarks.parse(msg.headers) is not None:
            return
        try:
            turn = decode_keyed(msg, keys, settings.max_future_skew_s)
        except InvalidEvent:
            return  # the extractor dead-letters bad turns (and key-less ones); once is enough
        if turn.erased or turn.type != "turn.recorded":
            return
        user, session, at = turn.user, turn.data.session, turn.time.timestamp()
        state = load(user, session)
        if state is None:
            return
        told: list[tuple[str, SessionState, list[list]]] = []
        # 1. sessions of this user that went idle before this turn: an episode each
        open_sessions = load_open(user) if embedder is not None else []
        others = {other: load(user, other) for other in open_sessions if other != session}
        last = {other: last_time(st) for other, st in others.items() if st is not None}
        closed = idle_sessions(last, session, at, idle_s) + [o for o, st in others.items() if st is None]
        for other in closed:
            other_state = others[other]
            if other_state is not None and (rest := untold(other_state, other_state.buf)):
                told.append((other, other_state, rest))
        index = [s for s in open_sessions if s not in closed] + ([] if session in open_sessions else [session])
        older = add_turn(state, turn.id, at, turn.data.role, turn.data.content,
                         window, settings.session_summary_chunk)
        if older is not None:
            summary, channel, model = await summarize(state.summary, older)
            fold(state, older, summary)
            data = SessionSummarized(session=turn.data.session, summary=summary, summary_version=state.version,
                                     message_count=state.count,
                                     through_time=datetime.fromtimestamp(state.through, UTC),
                                     through_event_id=state.through_id, channel=channel, model=model)
            env = make_envelope(data, user=turn.user, time=turn.time, id=derived_id(turn.id, "session.summarized"),
                                causation=turn.id, correlation=turn.correlation or turn.id, producer=PRODUCER)
            await memory_out.send(key=turn.user.encode(), value=encode(env, keys))
            # 2. the summarised chunk is an episode too
            if embedder is not None and (chunk := untold(state, older)):
                told.append((session, state, chunk))
        # 3. episodes out before any state is saved: a crash in between re-tells them (same ids)
        if embedder is not None:
            for fact in await episodes(turn, told):
                await facts_out.send(key=user.encode(), value=encode(fact, keys))
        # 4. save: the idle sessions, the open-session index, this session
        for other, other_state, _ in told:
            if other != session:
                save(user, other, other_state)
        if embedder is not None and index != open_sessions:
            save_open(user, index)
        save(user, session, state)

    return SessionSummarizer(table)
