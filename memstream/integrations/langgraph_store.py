"""A LangGraph long-term memory store (`langgraph.store.base.BaseStore`) backed by memstream's memories.

    store = MemstreamStore("http://127.0.0.1:8080", api_key=key)
    graph = builder.compile(store=store)                  # nodes: get_store().put / .get / .search / .delete

Every item is one memory of the memories resource (issue 25), so replay, time travel, history and
audit cover what a graph stores:

  namespace   (user, *labels): the first label is the memstream user (of the API key's tenant); the
              others are kept in the memory's metadata as `langgraph_ns` ("a/b": labels joined by
              '/', a label's own '%' and '/' %-escaped). LangMem's `("memories", "{langgraph_user_id}")`
              becomes `("{langgraph_user_id}", "memories")` here.
  put         a stated memory (POST /v1/memories, infer=false) with metadata {langgraph_ns,
              langgraph_key: key, langgraph_json: the value as compact JSON}. Its content, what recall
              embeds and searches, is the value's "content" text when it has one (LangMem's values),
              else the fields named by `index`, else the JSON. A put on a key that has a memory edits
              it (PATCH: a new version; the old one stays in the history, outdated by it). The
              metadata holds at most 2,048 bytes (schemas/limits.py), so a value's JSON gets about
              1,900 less its namespace and key: a larger one is refused (InvalidInput) before
              anything is sent.
  get         the key's active memory (POST /v1/memories/search, filtered on langgraph_ns and
              langgraph_key): its value from langgraph_json; created_at the key's first put,
              updated_at its last.
  delete      DELETE of the key's memory (a hard delete, recorded in the log).
  search      with a query: recall filtered on the namespace prefix, best first, with scores; without
              one: the namespace's memories, oldest first. `filter` matches the values as LangGraph's
              InMemoryStore does ($eq, $ne, $gt, …), on what the prefix selected (recall's k is then 100).
  list_namespaces
              the distinct namespaces of one user's items: the prefix must name the user
              (`prefix=(user,)`); suffix, max_depth, limit and offset as LangGraph's.

memstream stays a memory, not a key-value table: the memory processor decides every put as it decides
any stated fact. A put whose content restates another key's memory of the same user (cosine ≥ the
dedup threshold) reinforces that memory instead of creating one, and a put that gives a new value of
a slot another key's memory holds ("User lives in Porto" after "User lives in Lisbon") supersedes
it: such a key then reads as absent. Distinct texts, as LangMem writes, are distinct memories.

Consistency: a write returns once it is in the log (acks=all), not once it is applied. The store
keeps the position token of its last write per user and passes it as `after` on that user's reads
(read_your_writes=True), so a get right after a put sees it: the server waits up to `wait_s` and
answers 503 (kernel.errors.Timeout) if the pipeline has not applied it by then. A put first reads
the key (to edit rather than add) and so also waits for the store's previous write. Another process
sees a put once the pipeline applied it (eventual consistency).
"""
from __future__ import annotations

import json
from collections.abc import Generator, Iterable
from datetime import datetime
from typing import Any

try:
    from langgraph.store.base import (BaseStore, GetOp, Item, ListNamespacesOp, PutOp, SearchItem, SearchOp,
                                      get_text_at_path, tokenize_path)
    # the reference store's matching rules, so namespaces and value filters mean what they mean there
    from langgraph.store.memory import _compare_values, _does_match
except ImportError as exc:  # the optional extra is not installed
    raise ImportError("MemstreamStore needs LangGraph: pip install 'memstream[langgraph]'") from exc

import memstream_client

from kernel.errors import InvalidInput
from memstream.http_client import AsyncMemoryApi, MemoryApi, _translated
from schemas.limits import METADATA_MAX_BYTES, check_metadata

NS, KEY, JSON, CREATED = "langgraph_ns", "langgraph_key", "langgraph_json", "langgraph_created"
PAGE = 200          # the memory list's largest page
RECALL_MAX = 100    # recall's largest k
# the longest `langgraph_created` (an ISO time with microseconds and offset): a first put leaves room
# for it, so the put that edits the key later cannot outgrow the metadata limit
_CREATED_ROOM = "2026-01-01T00:00:00.000000+00:00"

Call = tuple[str, tuple, dict]                 # a memstream_client method, its positional and keyword args
Plan = Generator[Call, Any, Any]               # one store op: the calls it makes, then its result


def ns_text(namespace: tuple[str, ...]) -> str:
    """The labels after the user as one metadata string: '/'-joined, each label's '%' and '/' escaped."""
    return "/".join(label.replace("%", "%25").replace("/", "%2F") for label in namespace[1:])


def ns_labels(text: str) -> tuple[str, ...]:
    return () if text == "" else tuple(p.replace("%2F", "/").replace("%25", "%") for p in text.split("/"))


def _user(namespace: tuple[str, ...]) -> str:
    if not namespace or not namespace[0] or namespace[0] == "*":
        raise InvalidInput("a memstream namespace starts with the user id: (user, ...)")
    return namespace[0]


def _prefix_filter(labels: tuple[str, ...]) -> dict:
    """The filter selecting the store's memories under a namespace prefix (the user aside). The filter
    language has no prefix operator: a prefix is the exact namespace or the range [S/, S0) ('0' follows
    '/'), which Postgres' jsonpath compares by code point; what comes back is checked again here."""
    if not labels:
        return {"metadata": {NS: {"gte": ""}}}       # any string: every item of the store, nothing else
    s = ns_text(("", *labels))
    return {"or": [{"metadata": {NS: s}}, {"metadata": {NS: {"gte": s + "/", "lt": s + "0"}}}]}


def _under(text: str, labels: tuple[str, ...]) -> bool:
    return ns_labels(text)[:len(labels)] == labels


def _content(value: dict, index: Any) -> str:
    """What recall embeds: the fields `index` names, else the value's text "content", else its JSON."""
    if isinstance(index, list) and index:
        texts = [t for path in index for t in get_text_at_path(value, tokenize_path(path)) if t.strip()]
        if texts:
            return "\n".join(texts)
    text = value.get("content")
    if isinstance(text, str) and text.strip():
        return text
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _metadata(namespace: tuple[str, ...], key: str, value: dict, created: str | None) -> dict[str, Any]:
    try:
        packed = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"the value for key {key!r} is not JSON: {exc}") from None
    meta = {NS: ns_text(namespace), KEY: str(key), JSON: packed, CREATED: created or _CREATED_ROOM}
    size = len(json.dumps(meta, ensure_ascii=False, separators=(",", ":")).encode())
    if size > METADATA_MAX_BYTES:
        room = METADATA_MAX_BYTES - (size - len(json.dumps(packed, ensure_ascii=False).encode()))
        raise InvalidInput(
            f"the value for key {key!r} is {len(packed.encode())} bytes as compact JSON: memstream keeps a "
            f"LangGraph value in its memory's metadata, at most {METADATA_MAX_BYTES} bytes with the namespace and "
            f"key, which leaves about {max(room, 0)} bytes for this value")
    if created is None:
        del meta[CREATED]
    check_metadata(meta)             # the rest of the input contract (control characters in a key, …)
    return meta


def _is_item(m: Any) -> bool:
    meta = m.metadata or {}
    return isinstance(meta.get(NS), str) and isinstance(meta.get(KEY), str) and isinstance(meta.get(JSON), str)


def _fields(user: str, m: Any) -> tuple[tuple[str, ...], str, dict, datetime, datetime]:
    """(namespace, key, value, created_at, updated_at) of a memory (or recall hit) the store wrote."""
    meta = m.metadata
    created = meta.get(CREATED)
    first = datetime.fromisoformat(created) if isinstance(created, str) else m.created_at
    # a version's created_at is the put that made it: the key's last update
    return (user, *ns_labels(meta[NS])), meta[KEY], json.loads(meta[JSON]), first, m.created_at


def _item(user: str, m: Any) -> Item:
    namespace, key, value, created, updated = _fields(user, m)
    return Item(value=value, key=key, namespace=namespace, created_at=created, updated_at=updated)


def _matches(value: dict, flt: dict | None) -> bool:
    """LangGraph's value filter; a value it cannot compare (a field missing under $gte) does not match."""
    try:
        return not flt or all(_compare_values(value.get(k), v) for k, v in flt.items())
    except (TypeError, ValueError):
        return False


class MemstreamStore(BaseStore):
    """BaseStore over memstream's memories (HTTP API); one instance may serve many users (namespace[0])."""

    supports_ttl = False

    def __init__(self, base_url: str, api_key: str | None = None, *, read_your_writes: bool = True,
                 wait_s: float = 20.0, timeout: float = 60.0):
        self._url, self._key, self._timeout = base_url, api_key, timeout
        self._api = MemoryApi(base_url, timeout=timeout, api_key=api_key)
        self._aapi: AsyncMemoryApi | None = None      # made on first async use, in the caller's loop
        self.read_your_writes = read_your_writes
        self.wait_s = wait_s
        self._tokens: dict[str, str] = {}              # user → the position of this store's last write

    # -- plans: each op as the client calls it makes (run by batch or abatch) ---------------------
    def _after(self, user: str) -> dict:
        token = self._tokens.get(user) if self.read_your_writes else None
        return {"after": token, "wait_s": self.wait_s} if token else {}

    def _wrote(self, user: str, pos: Any) -> None:
        self._tokens[user] = pos.token

    def _plan(self, op: Any) -> Plan:
        if isinstance(op, PutOp):
            return self._put(op)
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise TypeError(f"unknown store op {op!r}")

    def _find(self, user: str, namespace: tuple[str, ...], key: str) -> Plan:
        """The key's active memories, oldest first (one, unless two writers added it at once)."""
        page = yield ("get_all", (user,), {"filters": {"metadata": {NS: ns_text(namespace), KEY: str(key)}},
                                           "limit": PAGE, **self._after(user)})
        return [m for m in page.memories if _is_item(m)]

    def _get(self, op: GetOp) -> Plan:
        user = _user(op.namespace)
        found = yield from self._find(user, op.namespace, op.key)
        return _item(user, found[-1]) if found else None

    def _put(self, op: PutOp) -> Plan:
        user = _user(op.namespace)
        if op.value is not None:          # refused before anything is read or sent
            _metadata(op.namespace, op.key, dict(op.value), None)
        found = yield from self._find(user, op.namespace, op.key)
        if op.value is None:              # delete
            for m in found:
                self._wrote(user, (yield ("delete", (user, m.memory_id), {"reason": "LangGraph store delete"})))
            return None
        value = dict(op.value)
        content = _content(value, op.index)
        if not found:
            self._wrote(user, (yield ("add", (content,), {"user": user, "infer": False,
                                                          "metadata": _metadata(op.namespace, op.key, value, None)})))
            return None
        current = found[-1]
        created = (current.metadata or {}).get(CREATED) or current.created_at.isoformat()
        self._wrote(user, (yield ("update", (user, current.memory_id), {
            "content": content, "metadata": _metadata(op.namespace, op.key, value, created)})))
        for extra in found[:-1]:          # a key two writers added at once: one memory stays
            self._wrote(user, (yield ("delete", (user, extra.memory_id), {"reason": "LangGraph store: one per key"})))
        return None

    def _search(self, op: SearchOp) -> Plan:
        user = _user(op.namespace_prefix)
        labels = tuple(op.namespace_prefix[1:])
        flt = _prefix_filter(labels)
        wanted = op.offset + op.limit
        if op.query:
            k = RECALL_MAX if op.filter else max(1, min(wanted, RECALL_MAX))
            hits = yield ("search", (user, op.query), {"k": k, "filters": flt, **self._after(user)})
            out = []
            for h in hits:
                if _is_item(h) and _under(h.metadata[NS], labels):
                    namespace, key, value, created, updated = _fields(user, h)
                    if _matches(value, op.filter):
                        out.append(SearchItem(namespace, key, value, created, updated, score=h.score))
            return out[op.offset:wanted]
        items: list[SearchItem] = []
        cursor, after = None, self._after(user)
        while len(items) < wanted:
            page = yield ("get_all", (user,), {"filters": flt, "limit": PAGE, "cursor": cursor, **after})
            after = {}                    # the first page waited for it
            for m in page.memories:
                if _is_item(m) and _under(m.metadata[NS], labels):
                    namespace, key, value, created, updated = _fields(user, m)
                    if _matches(value, op.filter):
                        items.append(SearchItem(namespace, key, value, created, updated))
            cursor = page.next_cursor
            if not cursor:
                break
        return items[op.offset:wanted]

    def _list_namespaces(self, op: ListNamespacesOp) -> Plan:
        prefix = next((c.path for c in op.match_conditions or () if c.match_type == "prefix"), ())
        if not prefix or prefix[0] == "*":
            raise InvalidInput("memstream lists the namespaces of one user: give a prefix that names the user, "
                               "list_namespaces(prefix=(user, ...))")
        user = prefix[0]
        fixed = []
        for label in prefix[1:]:          # the labels before a wildcard narrow the list in SQL
            if label == "*":
                break
            fixed.append(label)
        flt = _prefix_filter(tuple(fixed))
        seen: set[tuple[str, ...]] = set()
        cursor, after = None, self._after(user)
        while True:
            page = yield ("get_all", (user,), {"filters": flt, "limit": PAGE, "cursor": cursor, **after})
            after = {}
            seen.update((user, *ns_labels(m.metadata[NS])) for m in page.memories if _is_item(m))
            cursor = page.next_cursor
            if not cursor:
                break
        namespaces = [ns for ns in seen if all(_does_match(c, ns) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            namespaces = list({ns[:op.max_depth] for ns in namespaces})
        return sorted(namespaces)[op.offset:op.offset + op.limit]

    # -- BaseStore ------------------------------------------------------------------------------
    def batch(self, ops: Iterable) -> list:
        out = []
        for op in ops:      # in order: a get after a put in one batch reads that put
            plan = self._plan(op)
            result: Any = None
            try:
                while True:
                    method, args, kwargs = plan.send(result)
                    try:
                        result = getattr(self._api.client, method)(*args, **kwargs)
                    except memstream_client.MemstreamError as exc:
                        raise _translated(exc) from exc
            except StopIteration as done:
                out.append(done.value)
        return out

    async def abatch(self, ops: Iterable) -> list:
        if self._aapi is None:
            self._aapi = AsyncMemoryApi(self._url, timeout=self._timeout, api_key=self._key)
        out = []
        for op in ops:
            plan = self._plan(op)
            result: Any = None
            try:
                while True:
                    method, args, kwargs = plan.send(result)
                    try:
                        result = await getattr(self._aapi.client, method)(*args, **kwargs)
                    except memstream_client.MemstreamError as exc:
                        raise _translated(exc) from exc
            except StopIteration as done:
                out.append(done.value)
        return out

    def close(self) -> None:
        self._api.close()

    async def aclose(self) -> None:
        if self._aapi is not None:
            await self._aapi.aclose()
            self._aapi = None
