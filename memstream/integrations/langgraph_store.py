"""A LangGraph long-term memory store (`langgraph.store.base.BaseStore`) backed by memstream.

    store = MemstreamStore("http://127.0.0.1:8080", api_key=key)
    graph = builder.compile(store=store)                  # nodes: get_store().put / .search / .get

memstream is a memory, not a key-value table: what an agent stores is published as a conversation
turn and the pipeline decides what to remember from it. The mapping:

  namespace   (user, *labels): the first label is the memstream user (of the API key's tenant);
  put         one turn in the session `langgraph.<labels>.<key>` (labels and key %-escaped): a value
              {"content": text} is a *user* turn, so the extractor learns from it like anything the user
              said ("I live in Lisbon" becomes the memory "User lives in Lisbon", a location preference);
              any other JSON object (or index=False) is a *tool* turn holding the JSON, kept for `get`
              but not learned from (the extractor reads user turns only).
  get         the key's session window: its latest message is the value (last put wins), created_at and
              updated_at are the oldest and newest put still in the window.
  search      with a query: recall (semantic, over the memories the pipeline derived for the user, of
              every label: memories belong to the user, not to a sub-namespace); without one: the
              user's profile memories (identity, preference, policy). Keys are memory ids. `filter` is
              an equality match on the item values (after recall's k = offset + limit, at most 100).
  delete, list_namespaces
              NotImplementedError: the log is append-only and has no per-key delete (forgetting is
              `memstream forget` / `memstream erase`, admin commands), and the API lists no sessions.

Consistency: a put returns once the turn is in the log (acks=all), not once it is remembered. The
store keeps the last position token it published per user and passes it as `after` on that user's
reads (read_your_writes=True), so its own writes are visible to it; the server waits up to `wait_s`
and answers 503 (raised as memstream.errors.Timeout) if the pipeline has not applied them by then.
Another process sees a put only after the pipeline applied it (eventual consistency).
"""
from __future__ import annotations

import json
from typing import Any, Callable, Iterable
from urllib.parse import quote

try:
    from langgraph.store.base import BaseStore, GetOp, Item, ListNamespacesOp, PutOp, SearchItem, SearchOp
except ImportError as exc:  # the optional extra is not installed
    raise ImportError("MemstreamStore needs LangGraph: pip install 'memstream[langgraph]'") from exc

from memstream.errors import InvalidInput
from memstream.http_client import AsyncMemoryApi, MemoryApi

SESSION_PREFIX = "langgraph"
PROFILE_CATEGORIES = ("identity", "preference", "policy")   # query/profile.py's, as the profile route answers


def session_for(namespace: tuple[str, ...], key: str) -> str:
    """The memstream session holding one key: labels and key %-escaped ('/' too, which a URL path
    cannot carry), joined by '.' (LangGraph forbids '.' in labels; the key's own dots are escaped)."""
    parts = [quote(label, safe="") for label in namespace[1:]] + [quote(str(key), safe="").replace(".", "%2E")]
    return ".".join([SESSION_PREFIX, *parts])


def _user(namespace: tuple[str, ...]) -> str:
    if not namespace or not namespace[0]:
        raise InvalidInput("a memstream namespace starts with the user id: (user, ...)")
    return namespace[0]


def _turn(value: dict, index) -> tuple[str, str]:
    """(role, content) of a put: text to learn from, or JSON only kept."""
    if index is not False and set(value) == {"content"} and isinstance(value["content"], str):
        return "user", value["content"]
    return "tool", json.dumps(value, ensure_ascii=False, sort_keys=True)


def _value(message: dict) -> dict:
    return {"content": message["content"]} if message["role"] == "user" else json.loads(message["content"])


class MemstreamStore(BaseStore):
    """BaseStore over memstream's HTTP API; one instance may serve many users (namespace[0])."""

    def __init__(self, base_url: str, api_key: str | None = None, *, read_your_writes: bool = True,
                 wait_s: float = 20.0, timeout: float = 60.0):
        self._url, self._key, self._timeout = base_url, api_key, timeout
        self._api = MemoryApi(base_url, timeout=timeout, api_key=api_key)
        self._aapi: AsyncMemoryApi | None = None      # made on first async use, in the caller's loop
        self.read_your_writes = read_your_writes
        self.wait_s = wait_s
        self._tokens: dict[str, str] = {}              # user → the last position this store published

    # -- one op as (SDK method, args, kwargs, what to make of the answer) --------------------------
    def _after(self, user: str) -> dict:
        token = self._tokens.get(user) if self.read_your_writes else None
        return {"after": token, "wait_s": self.wait_s} if token else {}

    def _plan(self, op) -> tuple[str, tuple, dict, Callable[[Any], Any]]:
        if isinstance(op, PutOp):
            return self._plan_put(op)
        if isinstance(op, GetOp):
            user = _user(op.namespace)
            return "session", (user, session_for(op.namespace, op.key)), self._after(user), \
                lambda window: self._item(op, window["messages"])
        if isinstance(op, SearchOp):
            return self._plan_search(op)
        if isinstance(op, ListNamespacesOp):
            raise NotImplementedError("memstream lists no namespaces: the HTTP API has no route that enumerates "
                                      "a user's sessions")
        raise TypeError(f"unknown store op {op!r}")

    def _plan_put(self, op: PutOp):
        user = _user(op.namespace)
        if op.value is None:
            raise NotImplementedError("memstream cannot delete one key: its log is append-only and forgetting is an "
                                      "admin command (`memstream forget memory ID --user U`, `memstream erase user U`)")
        role, content = _turn(dict(op.value), op.index)

        def published(pos: dict) -> None:
            self._tokens[user] = pos["token"]         # one user's events share a partition: later is larger
        return "record_turn", (user, session_for(op.namespace, op.key), role, content), {}, published

    def _plan_search(self, op: SearchOp):
        user = _user(op.namespace_prefix)
        wanted = op.offset + op.limit

        def page(items: list[SearchItem]) -> list[SearchItem]:
            items = [i for i in items if all(i.value.get(k) == v for k, v in (op.filter or {}).items())]
            return items[op.offset:wanted]
        if op.query:
            def hits(answer: list[dict]) -> list[SearchItem]:
                return page([SearchItem(op.namespace_prefix, h["memory_id"],
                                        {f: h[f] for f in ("content", "category", "tags", "importance", "archived")},
                                        h["created_at"], h["created_at"], score=h["score"]) for h in answer])
            return "recall", (user, op.query), {"k": max(1, min(wanted, 100)), **self._after(user)}, hits

        def profile(answer: dict) -> list[SearchItem]:
            mems = sorted((dict(m, category=c) for c in PROFILE_CATEGORIES for m in answer.get(c, [])),
                          key=lambda m: -m["importance"])
            return page([SearchItem(op.namespace_prefix, m["memory_id"],
                                    {f: m[f] for f in ("content", "category", "importance")},
                                    m["created_at"], m["created_at"]) for m in mems])
        return "profile", (user,), self._after(user), profile

    @staticmethod
    def _item(op: GetOp, messages: list[dict]) -> Item | None:
        if not messages:
            return None
        return Item(value=_value(messages[-1]), key=op.key, namespace=op.namespace,
                    created_at=messages[0]["time"], updated_at=messages[-1]["time"])

    # -- BaseStore ------------------------------------------------------------------------------
    def batch(self, ops: Iterable) -> list:
        out = []
        for op in ops:      # in order: a get after a put in one batch reads that put
            method, args, kwargs, finish = self._plan(op)
            out.append(finish(getattr(self._api, method)(*args, **kwargs)))
        return out

    async def abatch(self, ops: Iterable) -> list:
        if self._aapi is None:
            self._aapi = AsyncMemoryApi(self._url, timeout=self._timeout, api_key=self._key)
        out = []
        for op in ops:
            method, args, kwargs, finish = self._plan(op)
            out.append(finish(await getattr(self._aapi, method)(*args, **kwargs)))
        return out

    def close(self) -> None:
        self._api.close()

    async def aclose(self) -> None:
        if self._aapi is not None:
            await self._aapi.aclose()
            self._aapi = None
