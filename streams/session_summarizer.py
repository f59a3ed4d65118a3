"""Session compression: turn.recorded → session.summarized, an agent of the memory processor's app.

It reads the turns topic (co-partitioned with facts and memory: key = user id, so one instance
decides for each user) and keeps per-(user, session) state in its own sealed table: the messages
not yet summarised and the rolling summary (memstream/domain/sessions.py). When the window
overflows by a chunk, the older messages are summarised — through the LLM channel when
MEMSTREAM_LLM_BASE_URL is set (bounded, timed out, retried; see streams/llm_channel.py), else, or
when the LLM gives no usable answer, extractively — and the summary is recorded once in a
`session.summarized` event on the memory topic (id derived from the turn that overflowed the
window). Replay reads that event and never summarises again. The session-windows projector stores it.

It runs as its own faust agent, so an LLM call holds up summaries, never memory decisions.
"""
from __future__ import annotations

import logging
from datetime import datetime, timezone

import orjson

from memstream import watermarks
from memstream.config import Settings
from memstream.domain.sessions import SessionState, add_turn, as_text, extractive_summary, fold
from memstream.errors import InvalidEvent
from memstream.ids import derived_id
from schemas.codec import KeyRing, decode, encode, make_envelope, open_blob, seal_blob
from schemas.events import SessionSummarized
from streams.app import raw_topic

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


def attach_session_summarizer(app, settings: Settings, keys: KeyRing, memory_out) -> SessionSummarizer:
    turns = raw_topic(app, settings.topic("turns"))
    table = app.Table("session-state", default=None, partitions=settings.partitions, key_type=bytes, value_type=bytes)
    window = 2 * settings.short_term_turns
    llm = None
    if settings.llm_base_url:
        from streams.llm_channel import LlmClient
        llm = LlmClient.from_settings(settings)

    def load(user: str, session: str) -> SessionState | None:
        blob = table.get(f"{user}\x00{session}".encode())
        if blob is None:
            return SessionState()
        opened = open_blob(keys, user, f"session:{user}:{session}", orjson.loads(blob))
        return None if opened is None else SessionState.from_dict(orjson.loads(opened))

    def save(user: str, session: str, state: SessionState) -> None:
        sealed = seal_blob(keys, user, f"session:{user}:{session}", orjson.dumps(state.to_dict()))
        table[f"{user}\x00{session}".encode()] = orjson.dumps(sealed)

    async def summarize(previous: str | None, older: list[list]) -> tuple[str, str, str | None]:
        if llm is not None:
            answer = await llm.summarize(as_text(previous, older), settings.session_summary_chars)
            if answer:
                return answer, "llm", llm.model
        return extractive_summary(previous, older, settings.session_summary_chars), "rule", None

    @app.agent(turns)
    async def summarize_sessions(stream):
        async for event in stream.events():
            msg = event.message
            if watermarks.parse(msg.headers) is not None:
                continue
            try:
                turn = decode(msg.value, keys)
            except InvalidEvent:
                continue  # the extractor dead-letters bad turns; once is enough
            if turn.erased or turn.type != "turn.recorded":
                continue
            state = load(turn.user, turn.data.session)
            if state is None:
                continue
            older = add_turn(state, turn.id, turn.time.timestamp(), turn.data.role, turn.data.content,
                             window, settings.session_summary_chunk)
            if older is not None:
                summary, channel, model = await summarize(state.summary, older)
                fold(state, older, summary)
                data = SessionSummarized(session=turn.data.session, summary=summary, summary_version=state.version,
                                         message_count=state.count,
                                         through_time=datetime.fromtimestamp(state.through, timezone.utc),
                                         through_event_id=state.through_id, channel=channel, model=model)
                env = make_envelope(data, user=turn.user, time=turn.time, id=derived_id(turn.id, "session.summarized"),
                                    causation=turn.id, correlation=turn.correlation or turn.id, producer=PRODUCER)
                await memory_out.send(key=turn.user.encode(), value=encode(env, keys))
            save(turn.user, turn.data.session, state)

    return SessionSummarizer(table)
