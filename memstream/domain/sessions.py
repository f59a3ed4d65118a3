"""Session compression: what falls out of a session's short-term window becomes a rolling summary.

Per (user, session) the summarizer keeps the messages not yet summarised, ordered by (event time,
event id) like the session-windows projector orders its window. When `window + chunk` of them
have accumulated (window = MaxTurns × 2), the oldest ones — everything but the newest `window` —
are folded, with the previous summary, into a new summary, recorded once as `session.summarized`.
Folding a chunk at a time (not one message per turn) keeps LLM calls at one per `chunk` turns.

State is bounded per session: at most window + chunk messages, the summary, and the ids of the
last DONE_CAP summarised messages (so a re-delivered turn is not summarised twice). A late turn
older than what was already summarised joins the next chunk.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from memstream.domain.consolidation import summarize_content

DONE_CAP = 64
LINE_CHARS = 80


@dataclass(slots=True)
class SessionState:
    summary: str | None = None
    version: int = 0
    count: int = 0                  # messages summarised so far
    through: float = 0.0            # event time (epoch s) of the newest summarised message
    through_id: str = ""
    buf: list[list] = field(default_factory=list)   # [time, event_id, role, content], oldest first
    done: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"summary": self.summary, "version": self.version, "count": self.count, "through": self.through,
                "through_id": self.through_id, "buf": self.buf, "done": self.done}

    @classmethod
    def from_dict(cls, d: dict) -> "SessionState":
        return cls(**d)


def add_turn(state: SessionState, event_id: str, at: float, role: str, content: str,
             window: int, chunk: int) -> list[list] | None:
    """Add one turn; the messages to summarise now (oldest first), or None."""
    if event_id in state.done or any(m[1] == event_id for m in state.buf):
        return None  # re-delivered
    state.buf.append([at, event_id, role, content])
    state.buf.sort(key=lambda m: (m[0], m[1]))
    if len(state.buf) < window + chunk:
        return None
    n = len(state.buf) - window
    older, state.buf = state.buf[:n], state.buf[n:]
    return older


def fold(state: SessionState, older: list[list], summary: str) -> None:
    """Record that `older` is now covered by `summary`."""
    state.summary = summary
    state.version += 1
    state.count += len(older)
    newest = max(older, key=lambda m: (m[0], m[1]))
    if (newest[0], newest[1]) > (state.through, state.through_id):
        state.through, state.through_id = newest[0], newest[1]
    state.done = (state.done + [m[1] for m in older])[-DONE_CAP:]


def as_text(previous: str | None, older: list[list]) -> str:
    """What the LLM channel is asked to summarise (the turn texts are data, not instructions)."""
    head = f"Previous summary:\n{previous}\n\n" if previous else ""
    return head + "Messages:\n" + "\n".join(f"{m[2]}: {m[3]}" for m in older)


def extractive_summary(previous: str | None, older: list[list], max_chars: int) -> str:
    """No LLM: the previous summary plus each message's first clause; the newest part kept when long."""
    lines = [f"{m[2]}: {summarize_content(m[3], LINE_CHARS)}" for m in older]
    text = " / ".join(([previous] if previous else []) + lines)
    if len(text) > max_chars:
        text = "…" + text[-(max_chars - 1):]
    return text
