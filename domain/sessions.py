"""Session compression: what falls out of a session's short-term window becomes a rolling summary.

Per (user, session) the summarizer keeps the messages not yet summarised, ordered by (event time,
event id) like the session-windows projector orders its window. When `window + chunk` of them
have accumulated (window = MaxTurns × 2), the oldest ones — everything but the newest `window` —
are folded, with the previous summary, into a new summary, recorded once as `session.summarized`.
Folding a chunk at a time (not one message per turn) keeps LLM calls at one per `chunk` turns.

State is bounded per session: at most window + chunk messages, the summary, and the ids of the
last DONE_CAP summarised messages (so a re-delivered turn is not summarised twice). A late turn
older than what was already summarised joins the next chunk.

Episodes: what a session was about becomes long-term memory too (category `episodic`). Each
chunk that is summarised yields an episode of that chunk, and a session that went idle — the
user speaks in another session more than `idle` seconds after its last message — yields an
episode of what no episode covered yet. `episode_through` remembers the newest message an
episode covered, so no message is told twice. All decided at event time, never the clock.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from domain.statements import third_person_en

DONE_CAP = 64
LINE_CHARS = 80
_CLAUSE_END = re.compile(r"[。！？!?；;，,\n]|\.(?:\s|$)")


def first_clause(text: str, max_chars: int) -> str:
    """A chat line's first clause, truncated to max_chars (with "…"). Not a memory's forgetting
    summary (consolidation.summarize_content keeps a fact's main clause): a transcript line is not
    a statement about the user, and earlier session summaries were decided with this rule."""
    m = _CLAUSE_END.search(text)
    first = text[: m.start()].strip() if m and m.start() > 0 else text
    if len(first) > max_chars:
        first = first[: max_chars - 1].rstrip() + "…"
    return first or text[:max_chars] or "…"


@dataclass(slots=True)
class SessionState:
    summary: str | None = None
    version: int = 0
    count: int = 0                  # messages summarised so far
    through: float = 0.0            # event time (epoch s) of the newest summarised message
    through_id: str = ""
    buf: list[list[Any]] = field(default_factory=list)   # [time, event_id, role, content], oldest first
    done: list[str] = field(default_factory=list)
    episode_through: list[Any] = field(default_factory=lambda: [0.0, ""])   # (time, id) of the newest message an episode told
    episodes: int = 0               # episodes told so far (numbers their ids)

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary, "version": self.version, "count": self.count, "through": self.through,
                "through_id": self.through_id, "buf": self.buf, "done": self.done,
                "episode_through": self.episode_through, "episodes": self.episodes}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SessionState":
        return cls(**d)


def add_turn(state: SessionState, event_id: str, at: float, role: str, content: str,
             window: int, chunk: int) -> list[list[Any]] | None:
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


def fold(state: SessionState, older: list[list[Any]], summary: str) -> None:
    """Record that `older` is now covered by `summary`."""
    state.summary = summary
    state.version += 1
    state.count += len(older)
    newest = max(older, key=lambda m: (m[0], m[1]))
    if (newest[0], newest[1]) > (state.through, state.through_id):
        state.through, state.through_id = newest[0], newest[1]
    state.done = (state.done + [m[1] for m in older])[-DONE_CAP:]


def as_text(previous: str | None, older: list[list[Any]]) -> str:
    """What the LLM channel is asked to summarise (the turn texts are data, not instructions)."""
    head = f"Previous summary:\n{previous}\n\n" if previous else ""
    return head + "Messages:\n" + "\n".join(f"{m[2]}: {m[3]}" for m in older)


def extractive_summary(previous: str | None, older: list[list[Any]], max_chars: int) -> str:
    """No LLM: the previous summary plus each message's first clause; the newest part kept when long."""
    lines = [f"{m[2]}: {first_clause(m[3], LINE_CHARS)}" for m in older]
    text = " / ".join(([previous] if previous else []) + lines)
    if len(text) > max_chars:
        text = "…" + text[-(max_chars - 1):]
    return text


# -- episodes -----------------------------------------------------------------------------------

EPISODE_IMPORTANCE = 0.4
EPISODE_LINE_CHARS = 160   # per message: an episode keeps more of each than the rolling summary


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    if len(text) <= n:
        return text
    cut = text[:n].rsplit(" ", 1)[0] if " " in text[:n] else text[:n]
    return cut + "…"


def untold(state: SessionState, messages: list[list[Any]]) -> list[list[Any]]:
    """The messages no episode covered yet, oldest first."""
    mark = tuple(state.episode_through)
    return [m for m in messages if (m[0], m[1]) > mark]


def tell(state: SessionState, messages: list[list[Any]]) -> int:
    """Record that an episode now covers `messages`; returns the episode's number (1, 2, …)."""
    newest = max((m[0], m[1]) for m in messages)
    if newest > tuple(state.episode_through):
        state.episode_through = list(newest)
    state.episodes += 1
    return state.episodes


_CJK = re.compile(r"[\u3400-\u9fff]")


def _as_said_by_user(text: str) -> str:
    """A user line in the third person, as every memory is written ("I adopted a cat" → "User adopted
    a cat", "我养了一只猫" → "用户养了一只猫"): a memory read later must not say "I" for the user."""
    if _CJK.search(text):
        return text.replace("我们", "用户和其他人").replace("我", "用户")
    return third_person_en(text)


def episode_content(day: str, messages: list[list[Any]], max_chars: int) -> str | None:
    """An episode in words: the day, then what the user said (each line clipped, in the third
    person), in order. The other speakers' lines are left out: an assistant's claim or question is
    not something the user told (issue 30). None when the user said nothing in it."""
    lines = [_as_said_by_user(_clip(m[3], EPISODE_LINE_CHARS)) for m in messages if m[2] == "user" and m[3].strip()]
    if not lines:
        return None
    text = f"Conversation on {day}: " + " / ".join(lines)
    return text if len(text) <= max_chars else text[:max_chars - 1] + "…"


def last_time(state: SessionState) -> float:
    """Event time of the session's newest message (the buffer keeps at least the window)."""
    return max((m[0] for m in state.buf), default=state.through)


def idle_sessions(open_sessions: dict[str, float], current: str, at: float, idle_s: float) -> list[str]:
    """The user's other open sessions whose last message is more than `idle_s` before `at`."""
    return sorted(s for s, last in open_sessions.items() if s != current and at - last > idle_s)
