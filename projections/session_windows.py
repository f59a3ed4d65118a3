"""Session windows: the short-term memory, the last MaxTurns × 2 messages per (user, session).

The window is the newest `2 × short_term_turns` turns ordered by (event time, offset): a function
of the set of turns, not of the order they were applied in, so a turn applied twice (even at
another offset) is either already there (same event id) or trimmed straight away as too old.

Erasure arrives on the memory topic, so this projector reads it too. As in task_buffers, an
erasure leaves a tombstone so no turn or summary of the user is written afterwards, whichever topic
the projector reads first (replay interleaves topics arbitrarily). Not only the erased past: an
erased user never gets a key again, so a turn newer than the erasure can only be one sealed with a
key some process still had cached while the erasure happened (a user publishing while being
erased), and it is refused too (tests/test_erasure_storage.py).

A cleared session (`session.forgotten`, DELETE /v1/users/{user}/sessions/{session}) also arrives
on the memory topic, so it works like an erasure narrowed to one session: a tombstone (user,
session, time) refuses every turn of that session said at or before the clear, whichever topic
replay reads first, and the rows and summary already there go. A turn said after the clear starts
the session afresh. Summaries share the memory topic's partition with the clear, so their order
against it is the log's, live and in replay alike.

What falls out of the window is not lost: the session summarizer (streams/session_summarizer.py)
records a rolling summary as `session.summarized`, and this projector keeps the newest version per
session in `session_summaries` (only a higher version replaces it, so re-applying is a no-op).
"""
from __future__ import annotations


from kernel.config import Settings
from projections import pg
from projections.postgres_projectors import _PostgresProjector
from projections.runner import Item, kind_by_type, runs_by_kind

DDL = """
CREATE TABLE IF NOT EXISTS {s}.session_messages (
    event_id   text PRIMARY KEY,
    user_id    text NOT NULL,
    session    text NOT NULL,
    task_id    text,
    role       text NOT NULL,
    content    text NOT NULL,
    sent_at    timestamptz NOT NULL,
    log_offset bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS session_messages_order ON {s}.session_messages (user_id, session, sent_at, log_offset);
CREATE TABLE IF NOT EXISTS {s}.session_window_erasures (
    event_id  text PRIMARY KEY,
    user_id   text NOT NULL,
    erased_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS session_window_erasures_user ON {s}.session_window_erasures (user_id, erased_at);
CREATE TABLE IF NOT EXISTS {s}.session_forgets (
    event_id     text PRIMARY KEY,
    user_id      text NOT NULL,
    session      text NOT NULL,
    forgotten_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS session_forgets_session ON {s}.session_forgets (user_id, session, forgotten_at);
CREATE TABLE IF NOT EXISTS {s}.session_summaries (
    user_id          text NOT NULL,
    session          text NOT NULL,
    summary          text NOT NULL,
    version          int  NOT NULL,
    message_count    int  NOT NULL,
    through_time     timestamptz NOT NULL,
    through_event_id text NOT NULL,
    channel          text NOT NULL,
    model            text,
    event_id         text NOT NULL,
    summarized_at    timestamptz NOT NULL,
    PRIMARY KEY (user_id, session)
);
"""


def ensure_tables(settings: Settings) -> None:
    pg.ensure_ddl(settings, DDL)


class SessionWindowsProjector(_PostgresProjector):
    """turn.recorded (+ user.erased, session.forgotten) → session_messages, trimmed to MaxTurns × 2
    per session."""

    name = "session-windows"
    topics = ("turns", "memory")
    CHECKSUM = {"session_messages": (["event_id", "user_id", "session", "task_id", "role", "content", "sent_at"],
                                     ["event_id"]),
                "session_summaries": (["user_id", "session", "summary", "version", "message_count", "through_time",
                                       "through_event_id", "channel", "model", "event_id", "summarized_at"],
                                      ["user_id", "session"])}
    kind_of = staticmethod(kind_by_type({"user.erased": "erase", "turn.recorded": "turn",
                                         "session.summarized": "summary", "session.forgotten": "forget"}))

    def setup(self) -> None:
        super().setup()
        ensure_tables(self.settings)

    @property
    def window(self) -> int:
        return 2 * self.settings.short_term_turns

    def write(self, cur, items: list[Item]) -> None:
        for kind, run in runs_by_kind(items, self.kind_of):
            if kind == "erase":
                self._erase(cur, run)
            elif kind == "turn":
                self._turns(cur, run)
            elif kind == "summary":
                self._summaries(cur, run)
            elif kind == "forget":
                self._forget(cur, run)

    def _summaries(self, cur, run: list[Item]) -> None:
        # Summaries arrive on the memory topic, in the user's order; none after an erasure of theirs.
        cur.executemany(self.q(
            "INSERT INTO {s}.session_summaries (user_id, session, summary, version, message_count, through_time, "
            "through_event_id, channel, model, event_id, summarized_at) SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s "
            "WHERE NOT EXISTS (SELECT 1 FROM {s}.session_window_erasures e WHERE e.user_id = %s) "
            "ON CONFLICT (user_id, session) DO UPDATE SET summary = EXCLUDED.summary, version = EXCLUDED.version, "
            "message_count = EXCLUDED.message_count, through_time = EXCLUDED.through_time, "
            "through_event_id = EXCLUDED.through_event_id, channel = EXCLUDED.channel, model = EXCLUDED.model, "
            "event_id = EXCLUDED.event_id, summarized_at = EXCLUDED.summarized_at "
            "WHERE {s}.session_summaries.version < EXCLUDED.version"),
            [(i.event.user, d.session, d.summary, d.summary_version, d.message_count, d.through_time,
              d.through_event_id, d.channel, d.model, i.event.id, i.event.time, i.event.user)
             for i in run for d in (i.event.data,)])

    def _turns(self, cur, run: list[Item]) -> None:
        # 1. Each turn once, unless its user was erased (before or after it was said: see the module)
        #    or its session was cleared after it was said.
        cur.executemany(self.q(
            "INSERT INTO {s}.session_messages (event_id, user_id, session, task_id, role, content, sent_at, log_offset) "
            "SELECT %(id)s, %(user)s, %(session)s, %(task)s, %(role)s, %(content)s, %(time)s, %(offset)s "
            "WHERE NOT EXISTS (SELECT 1 FROM {s}.session_window_erasures e "
            "WHERE e.user_id = %(user)s) AND NOT EXISTS (SELECT 1 FROM {s}.session_forgets f "
            "WHERE f.user_id = %(user)s AND f.session = %(session)s AND f.forgotten_at >= %(time)s) "
            "ON CONFLICT (event_id) DO NOTHING"),
            [{"id": i.event.id, "user": i.event.user, "session": d.session, "task": d.task, "role": d.role,
              "content": d.content, "time": i.event.time, "offset": i.offset} for i in run for d in (i.event.data,)])
        # 2. Trim each touched session to its newest messages (after the whole run: same result).
        pairs = sorted({(i.event.user, i.event.data.session) for i in run})
        cur.execute(self.q(
            "DELETE FROM {s}.session_messages m USING (SELECT event_id, row_number() OVER (PARTITION BY user_id, session "
            "ORDER BY sent_at DESC, log_offset DESC, event_id DESC) AS rn FROM {s}.session_messages "
            "WHERE (user_id, session) IN (SELECT * FROM unnest(%s::text[], %s::text[]))) old "
            "WHERE m.event_id = old.event_id AND old.rn > %s"),
            ([u for u, _ in pairs], [s for _, s in pairs], self.window))

    def _forget(self, cur, run: list[Item]) -> None:
        for i in run:
            user, session, at = i.event.user, i.event.data.session, i.event.time
            # 1. The tombstone: a turn of the session said by then, applied later (replay reads the
            #    turns topic whenever), is refused by _turns. Re-applying the event changes nothing.
            cur.execute(self.q("INSERT INTO {s}.session_forgets (event_id, user_id, session, forgotten_at) "
                               "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING"), (i.event.id, user, session, at))
            # 2. What the window holds of it by then, and its summary (cumulative: it holds them too).
            cur.execute(self.q("DELETE FROM {s}.session_messages WHERE user_id = %s AND session = %s AND sent_at <= %s"),
                        (user, session, at))
            cur.execute(self.q("DELETE FROM {s}.session_summaries WHERE user_id = %s AND session = %s"),
                        (user, session))

    def _erase(self, cur, run: list[Item]) -> None:
        for i in run:
            # 1. The tombstone, once per erasure event: a duplicate must not delete turns written since.
            cur.execute(self.q("INSERT INTO {s}.session_window_erasures (event_id, user_id, erased_at) VALUES (%s, %s, %s) "
                               "ON CONFLICT DO NOTHING"), (i.event.id, i.event.user, i.event.time))
            # 2. Every window of the user goes.
            if cur.rowcount:
                self.erase_users(cur, [i.event.user], ("session_messages", "session_summaries"))
