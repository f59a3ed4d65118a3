"""Session compression: turn.recorded → session.summarized, an agent of the memory processor's app.

It reads the turns topic (co-partitioned with facts and memory: key = user id, so one instance
decides for each user) and keeps per-(user, session) state in its own sealed table: the messages
not yet summarised and the rolling summary (domain/sessions.py). When the window
overflows by a chunk, the older messages are summarised — through the LLM channel when
MEMSTREAM_LLM_BASE_URL is set (bounded, timed out, retried; see streams/llm_channel.py), else, or
when the LLM gives no usable answer, extractively — and the summary is recorded once in a
`session.summarized` event on the memory topic (id derived from the turn that overflowed the
window). Replay reads that event and never summarises again. The session-windows projector stores it.

Episodes: each summarised chunk, and a session that went idle (the user speaks in another
session `session_idle_minutes` after its last message), becomes a `fact.extracted` of category
`episodic` on the facts topic (domain/sessions.py decides which messages; the
embedding is computed here, once), so the memory processor keeps what a session was about as a
memory, recallable across sessions. Each user's open sessions are kept in the same table under
the key `user\x00`.

The steps themselves are streams/session_core.py's SessionCore (decoded turns in, events out);
this module is its faust driver: it reads and decodes the turns, sends each event the core
returns to its topic before asking for the next, and the core saves its state after the last.

It runs as its own faust agent, so an LLM call holds up summaries, never memory decisions.
"""
from __future__ import annotations

import logging

from kernel import watermarks
from kernel.config import Settings
from adapters.embedding import Embedder
from kernel.errors import InvalidEvent
from schemas.codec import KeyRing, encode
from streams.app import DeadLetters, Guard, decode_keyed, fatal, raw_topic, state_table
from streams.llm_channel import LlmClient
from streams.session_core import FACTS, MEMORY, SessionCore

log = logging.getLogger("memstream.sessions")


def attach_session_summarizer(app, settings: Settings, keys: KeyRing, memory_out,
                              embedder: Embedder | None = None) -> SessionCore:
    """`embedder`: episodes become memories only where one is given (they need a vector)."""
    turns = raw_topic(app, settings.topic("turns"))
    topics = {MEMORY: memory_out, FACTS: raw_topic(app, settings.topic("facts"))}
    llm = LlmClient.from_settings(settings) if settings.llm_base_url else None
    core = SessionCore(settings, keys, state_table(app, settings, "session-state"), embedder, llm)
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
        async for out in core.on_turn(turn):   # the core saves its state after the last one
            await topics[out.topic].send(key=out.key.encode(), value=encode(out.envelope, keys))

    return core
