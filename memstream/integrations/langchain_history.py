"""A LangChain chat message history (`BaseChatMessageHistory`) backed by one memstream session.

    history = MemstreamChatMessageHistory("http://127.0.0.1:8080", "alice", "chat-1", api_key=key)
    RunnableWithMessageHistory(chain, MemstreamHistories("http://127.0.0.1:8080", "alice", api_key=key))

add_messages  one turn per message (human → user, ai → assistant, system, tool; a ChatMessage keeps its
              role when memstream knows it): the pipeline remembers what the user said, like any turn.
              A message without text (an AI message that only calls tools) is not recorded: memstream
              records what was said, not tool-call structure.
messages      the session window (GET /v1/users/{user}/sessions/{session}), oldest first. The window
              is bounded (the projector keeps MaxTurns × 2 messages); with include_summary=True the
              rolling summary of what fell out of it comes first, as a SystemMessage.
clear         forgets the session (DELETE /v1/users/{user}/sessions/{session}, scope memory:write): its
              messages and summary leave the window and the memories learned in it are deleted, both
              recorded as events (the log itself stays append-only). The next `messages` reads after
              it; a message added later starts the session afresh.

Read-your-writes: reads pass the position of the session's last write as `after`, so a message just
added is in `messages` (the server waits up to `wait_s`, then 503 → kernel.errors.Timeout).
RunnableWithMessageHistory asks its factory for a new history object on every call: MemstreamHistories
is that factory, and its histories share one HTTP client and the positions of their writes, so a
call reads what the previous call added even before the pipeline has caught up on its own.
"""
from __future__ import annotations

from typing import Sequence

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
except ImportError as exc:  # the optional extra is not installed
    raise ImportError("MemstreamChatMessageHistory needs LangChain: pip install 'memstream[langchain]'") from exc

from memstream.http_client import MemoryApi

ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
KNOWN = {"user", "assistant", "system", "tool"}


def _role(message: BaseMessage) -> str:
    if message.type == "chat" and getattr(message, "role", None) in KNOWN:
        return message.role
    if message.type not in ROLES:
        raise ValueError(f"memstream records user, assistant, system and tool turns, not a {message.type!r} message")
    return ROLES[message.type]


def _text(message: BaseMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in message.content
                   if isinstance(b, (str, dict)))


def _message(m: dict) -> BaseMessage:
    if m["role"] == "user":
        return HumanMessage(m["content"])
    if m["role"] == "assistant":
        return AIMessage(m["content"])
    if m["role"] == "tool":    # the call id is not kept by memstream
        return ToolMessage(m["content"], tool_call_id="")
    return SystemMessage(m["content"])


class MemstreamChatMessageHistory(BaseChatMessageHistory):
    def __init__(self, base_url: str | MemoryApi, user: str, session: str, *, api_key: str | None = None,
                 include_summary: bool = False, wait_s: float = 20.0, timeout: float = 60.0,
                 positions: dict | None = None):
        self._api = base_url if isinstance(base_url, MemoryApi) else MemoryApi(base_url, timeout=timeout,
                                                                               api_key=api_key)
        self.user, self.session = user, session
        self.include_summary, self.wait_s = include_summary, wait_s
        self._positions = {} if positions is None else positions   # (user, session) → last write's token

    @property
    def messages(self) -> list[BaseMessage]:
        token = self._positions.get((self.user, self.session))
        window = self._api.session(self.user, self.session, after=token, wait_s=self.wait_s if token else None)
        out = [_message(m) for m in window["messages"]]
        summary = window.get("summary")
        if self.include_summary and summary and summary.get("summary"):
            out.insert(0, SystemMessage(f"Summary of the earlier conversation: {summary['summary']}"))
        return out

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        for message in messages:
            text = _text(message)
            if text.strip():
                pos = self._api.record_turn(self.user, self.session, _role(message), text)
                self._positions[(self.user, self.session)] = pos["token"]

    def clear(self) -> None:
        """Forget this session: its window and the memories learned in it (session.forgotten)."""
        pos = self._api.forget_session(self.user, self.session, reason="langchain history clear()")
        self._positions[(self.user, self.session)] = pos["token"]   # the next read waits for the clear


class MemstreamHistories:
    """`session_id → MemstreamChatMessageHistory` for RunnableWithMessageHistory: one user, one HTTP
    client, and the positions of the writes shared by every history it makes (read-your-writes)."""

    def __init__(self, base_url: str, user: str, *, api_key: str | None = None, **options):
        self._api = MemoryApi(base_url, timeout=options.pop("timeout", 60.0), api_key=api_key)
        self.user, self._options, self._positions = user, options, {}

    def __call__(self, session_id: str) -> MemstreamChatMessageHistory:
        return MemstreamChatMessageHistory(self._api, self.user, session_id, positions=self._positions, **self._options)

    def close(self) -> None:
        self._api.close()
