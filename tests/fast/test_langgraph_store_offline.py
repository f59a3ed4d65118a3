"""MemstreamStore's requests, without a server (httpx.MockTransport): what a put, get, delete, search and
list_namespaces send, and what is refused before anything is sent. The real pipeline's behaviour is
tests/test_integrations.py's."""
from __future__ import annotations

import json

import httpx
import pytest

pytest.importorskip("langgraph")

from kernel.errors import InvalidInput  # noqa: E402
from memstream.integrations.langgraph_store import MemstreamStore, ns_labels, ns_text  # noqa: E402

T0 = "2026-12-01T10:00:00+00:00"
POS = {"topic": "t.turns", "partition": 0, "offset": 7, "token": "t.turns:0:7"}


def memory(mid: str, ns: str, key: str, value: dict, created: str = T0, **meta) -> dict:
    return {"memory_id": mid, "content": "x", "category": "general", "importance": 0.6, "status": "active",
            "created_at": created, "updated_at": created,
            "metadata": {"langgraph_ns": ns, "langgraph_key": key,
                         "langgraph_json": json.dumps(value, separators=(",", ":")), **meta}}


class Server:
    """Answers from a list of (method, path) → JSON, recording each request."""

    def __init__(self, *answers):
        self.answers, self.seen = list(answers), []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.seen.append((request.method, request.url.path, body, dict(request.url.params)))
        method, path, answer = self.answers.pop(0)
        assert (request.method, request.url.path) == (method, path), self.seen[-1]
        return httpx.Response(200, json=answer)


def store_on(server: Server) -> MemstreamStore:
    store = MemstreamStore("http://memstream.test", api_key="msk_test")
    store._api.client._http = httpx.Client(base_url="http://memstream.test", transport=httpx.MockTransport(server))
    return store


def test_labels_round_trip_through_the_metadata_string():
    for labels in [(), ("a",), ("a", "b"), ("a/b", "c%2F", "%")]:
        assert ns_labels(ns_text(("u", *labels))) == labels
    assert ns_text(("u", "a/b", "c")) == "a%2Fb/c"


def test_a_new_key_is_a_stated_memory_then_an_edit_and_reads_wait_for_the_write():
    ns = ("alice", "prefs")
    server = Server(("POST", "/v1/memories/search", {"user": "alice", "memories": [], "next_cursor": None}),
                    ("POST", "/v1/memories", {**POS, "positions": [POS]}),
                    ("POST", "/v1/memories/search", {"user": "alice", "next_cursor": None,
                                                     "memories": [memory("m1", "prefs", "ui", {"theme": "dark"})]}),
                    ("PATCH", "/v1/users/alice/memories/m1", {**POS, "offset": 9, "token": "t.turns:0:9",
                                                              "memory_id": "m2"}),
                    ("POST", "/v1/memories/search", {"user": "alice", "next_cursor": None, "memories": [
                        memory("m2", "prefs", "ui", {"theme": "light"}, "2026-12-01T11:00:00+00:00",
                               langgraph_created=T0)]}))
    store = store_on(server)
    store.put(ns, "ui", {"theme": "dark"})
    store.put(ns, "ui", {"theme": "light"})
    item = store.get(ns, "ui")
    assert (item.namespace, item.key, item.value) == (ns, "ui", {"theme": "light"})
    assert item.created_at.isoformat() == T0 and item.updated_at.isoformat() == "2026-12-01T11:00:00+00:00"

    find, add, find2, edit, get = server.seen
    assert find[2]["filters"] == {"metadata": {"langgraph_ns": "prefs", "langgraph_key": "ui"}} and "after" not in find[2]
    assert add[2] == {"user": "alice", "content": '{"theme":"dark"}', "infer": False, "metadata": {
        "langgraph_ns": "prefs", "langgraph_key": "ui", "langgraph_json": '{"theme":"dark"}'}}
    assert find2[2]["after"] == "t.turns:0:7"                      # the put reads the key after its last write
    assert edit[2] == {"content": '{"theme":"light"}', "metadata": {
        "langgraph_ns": "prefs", "langgraph_key": "ui", "langgraph_json": '{"theme":"light"}', "langgraph_created": T0}}
    assert get[2]["after"] == "t.turns:0:9"                        # read your write: the edit's position


def test_refused_before_anything_is_sent():
    store = store_on(Server())                                     # any request would fail the test
    with pytest.raises(InvalidInput, match=r"20014 bytes as compact JSON.*2048 bytes.*about 19[0-9][0-9] bytes"):
        store.put(("alice", "m"), "big", {"content": "x" * 20000})
    with pytest.raises(InvalidInput, match="names the user"):
        store.list_namespaces()
    with pytest.raises(InvalidInput, match="names the user"):
        store.list_namespaces(prefix=("*", "m"))


def test_delete_search_and_list_namespaces():
    items = [memory("m1", "m", "a", {"content": "one", "n": 1}), memory("m2", "m/x", "b", {"content": "two", "n": 2}),
             memory("m3", "mx", "c", {"content": "not under m"})]
    page = {"user": "u", "memories": items, "next_cursor": None}
    server = Server(("POST", "/v1/memories/search", {"user": "u", "memories": items[:1], "next_cursor": None}),
                    ("DELETE", "/v1/users/u/memories/m1", {**POS, "memory_ids": ["m1"]}),
                    ("POST", "/v1/memories/search", page),
                    ("POST", "/v1/recall", [{**items[1], "score": 0.9}, {**items[2], "score": 0.8}]),
                    ("POST", "/v1/memories/search", page))
    store = store_on(server)
    store.delete(("u", "m"), "a")
    assert server.seen[1][3] == {"reason": "LangGraph store delete"}
    # a prefix is matched label by label: "mx" is not under "m", whatever the range filter let through
    assert [i.key for i in store.search(("u", "m"), filter={"n": {"$gte": 2}})] == ["b"]
    hits = store.search(("u", "m"), query="two")
    assert [(h.key, h.namespace, h.score) for h in hits] == [("b", ("u", "m", "x"), 0.9)]
    recall = server.seen[3][2]
    assert recall["filters"] == {"or": [{"metadata": {"langgraph_ns": "m"}},
                                        {"metadata": {"langgraph_ns": {"gte": "m/", "lt": "m0"}}}]}
    assert store.list_namespaces(prefix=("u",), max_depth=2) == [("u", "m"), ("u", "mx")]
