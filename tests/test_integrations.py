"""Framework adapters (memstream/integrations/) on the real stack, pipeline and HTTP API (uvicorn).

A LangGraph graph writes through MemstreamStore and finds what the pipeline learned from it; a
LangChain runnable keeps its history in a memstream session, read back through the API. No LLM: the
chat model is langchain_core's own FakeListChatModel. Both go through API keys, so the tenant and
scope checks are the HTTP API's. Skipped only when the extras are not installed (`.[test]` pulls them in).
"""
from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import time
from typing import TypedDict

import httpx
import pytest

from kernel.errors import AccessDenied, InvalidInput
from memstream.http_client import MemoryApi
from memstream.app.workers import worker_command
from tests.auth_helpers import make_key
from tests.helpers import unique_user

pytestmark = pytest.mark.timeout(600)
RW = ("memory:read", "memory:write")


@pytest.fixture(scope="module")
def api_url(settings, pipeline):
    """The API as agents reach it: a uvicorn process (the adapters use the HTTP SDK, not a TestClient)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(settings.stack_dir / "logs" / f"{settings.namespace}-api-integrations.log", "ab")
    # reads wait up to 60 s for their `after` (a loaded 2-core CI machine): above the default MEMSTREAM_MAX_WAIT_S
    proc = subprocess.Popen(worker_command("x")[:3] + ["api", "--port", str(port)],
                            env={**os.environ, "MEMSTREAM_MAX_WAIT_S": "120"}, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/openapi.json", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=15)


def test_langgraph_store_keeps_items_as_memories(api_url, settings):
    pytest.importorskip("langgraph")
    from langgraph.config import get_store
    from langgraph.graph import END, START, StateGraph

    from memstream.integrations.langgraph_store import MemstreamStore

    key = make_key(settings, "acme", RW, name="langgraph")
    store = MemstreamStore(api_url, api_key=key, wait_s=60)
    api = MemoryApi(api_url, api_key=key)
    user = unique_user("lg")
    ns = (user, "memories")

    class State(TypedDict):
        said: str
        question: str
        found: list

    def remember(state: State) -> dict:
        get_store().put(ns, "home", {"content": state["said"]})
        return {}

    def recall(state: State) -> dict:
        # the store passes its put's position as `after`: the search waits until the pipeline applied it
        return {"found": [(i.key, i.value["content"], i.namespace, i.score) for i in
                          get_store().search(ns, query=state["question"], limit=3)]}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    out = builder.compile(store=store).invoke({"said": "User lives in Lisbon", "question": "where does the user live?",
                                               "found": []})
    assert [f[:3] for f in out["found"]] == [("home", "User lives in Lisbon", ns)] and out["found"][0][3] > 0

    # get: the exact value put; the memory is a stated one, the value and its key in its metadata
    item = store.get(ns, "home")
    assert (item.key, item.namespace, item.value) == ("home", ns, {"content": "User lives in Lisbon"})
    [memory] = api.client.get_all(user).memories
    assert memory.content == "User lives in Lisbon" and memory.metadata == {
        "langgraph_ns": "memories", "langgraph_key": "home", "langgraph_json": '{"content":"User lives in Lisbon"}'}

    # any JSON value; a put on an existing key edits its memory (a new version, the old one in its history)
    store.put(ns, "ui", {"theme": "dark", "font": 12, "tags": ["a", "b"]})
    first = store.get(ns, "ui")
    assert first.value == {"theme": "dark", "font": 12, "tags": ["a", "b"]}
    store.put(ns, "ui", {"theme": "light", "font": 14})
    now = store.get(ns, "ui")
    assert now.value == {"theme": "light", "font": 14}
    assert now.created_at == first.created_at < now.updated_at
    versions = api.client.get_all(user, status="all", filters={"metadata": {"langgraph_key": "ui"}}).memories
    assert len(versions) == 2 and versions[0].superseded_by == versions[1].memory_id

    # nested namespaces, search by prefix (a label is matched whole), value filters, other memories left out
    work = (user, "memories", "work")
    store.put(work, "desk", {"content": "User works at a standing desk", "floor": 3})
    api.client.add("User likes jazz", user=user, infer=False)           # not the store's: never an item
    assert {i.key for i in store.search(ns)} == {"home", "ui", "desk"}
    assert [i.key for i in store.search(work)] == ["desk"]
    assert store.search((user, "memo")) == [] and {i.key for i in store.search((user,))} == {"home", "ui", "desk"}
    assert {i.key for i in store.search((user,), query="jazz music")} <= {"home", "ui", "desk"}
    assert [i.key for i in store.search(ns, filter={"theme": "light"})] == ["ui"]
    assert [i.key for i in store.search(ns, query="where does the user work?", filter={"floor": {"$gte": 3}})] == ["desk"]
    assert [i.key for i in store.search(ns, limit=1, offset=1)] == ["ui"]

    # list_namespaces: the distinct namespaces of one user's items
    assert store.list_namespaces(prefix=(user,)) == [ns, work]
    assert store.list_namespaces(prefix=(user,), max_depth=2) == [ns]
    assert store.list_namespaces(prefix=(user,), suffix=("work",)) == [work]
    assert store.list_namespaces(prefix=(user, "*", "work")) == [work]
    assert store.list_namespaces(prefix=(user,), limit=1, offset=1) == [work]
    with pytest.raises(InvalidInput, match="names the user"):
        store.list_namespaces()

    # delete: the memory goes (a hard delete in the log); the namespace with it when it was the last item
    store.delete(work, "desk")
    assert store.get(work, "desk") is None and store.list_namespaces(prefix=(user,)) == [ns]
    store.delete(work, "never-put")        # nothing to delete: nothing happens

    # a value too large for a memory's metadata is refused, clearly, before anything is sent
    with pytest.raises(InvalidInput, match="bytes as compact JSON.*2048"):
        store.put(ns, "big", {"content": "x" * 3000})

    # another store (no token of its own) sees the writes, now that the pipeline applied them
    assert MemstreamStore(api_url, api_key=key).get(ns, "ui").value == {"theme": "light", "font": 14}
    # tenants: the same user id under another tenant's key is someone else, with nothing stored
    other = MemstreamStore(api_url, api_key=make_key(settings, "globex", RW, name="langgraph-other"))
    assert other.get(ns, "home") is None and other.search(ns, query="where does the user live?") == []
    assert other.list_namespaces(prefix=(user,)) == []
    # scopes: a read-only key cannot put (403 from the API, before anything is published)
    reader = MemstreamStore(api_url, api_key=make_key(settings, "acme", ("memory:read",), name="langgraph-ro"))
    with pytest.raises(AccessDenied, match="memory:write"):
        reader.put(ns, "home", {"content": "User lives in Madrid"})

    # the async path (abatch): put, get, search, delete
    async def later():
        await store.aput(ns, "pet", {"content": "User has a cat named Miso"})
        got = await store.aget(ns, "pet")
        hits = await store.asearch(ns, query="what pet does the user have?", limit=1)
        await store.adelete(ns, "pet")
        gone = await store.aget(ns, "pet")
        await store.aclose()
        return got, hits, gone
    got, hits, gone = asyncio.run(later())
    assert got.value == {"content": "User has a cat named Miso"} and gone is None
    assert [h.key for h in hits] == ["pet"]
    for s in (store, other, reader):
        s.close()
    api.close()


def test_langmem_manage_memory_tool_creates_updates_and_deletes(api_url, settings):
    """LangMem's manage-memory tool (called as an agent's model would call it: no LLM) and its search
    tool, on the store."""
    pytest.importorskip("langmem")
    from langmem import create_manage_memory_tool, create_search_memory_tool

    from memstream.integrations.langgraph_store import MemstreamStore

    store = MemstreamStore(api_url, api_key=make_key(settings, "acme", RW, name="langmem"), wait_s=60)
    user = unique_user("lm")
    config = {"configurable": {"langgraph_user_id": user}}
    template = ("{langgraph_user_id}", "memories")       # memstream's namespaces start with the user
    manage = create_manage_memory_tool(namespace=template, store=store)
    search = create_search_memory_tool(namespace=template, store=store)
    ns = (user, "memories")

    created = manage.invoke({"content": "User prefers dark mode in every editor", "action": "create"}, config)
    memory_id = created.split()[-1]
    assert created == f"created memory {memory_id}"
    assert store.get(ns, memory_id).value == {"content": "User prefers dark mode in every editor"}
    manage.invoke({"content": "User books trains, never flights", "action": "create"}, config)

    manage.invoke({"content": "User prefers light mode in every editor", "action": "update", "id": memory_id}, config)
    assert store.get(ns, memory_id).value == {"content": "User prefers light mode in every editor"}
    found = search.invoke({"query": "which editor theme does the user like?", "limit": 1}, config)
    assert "light mode" in found and memory_id in found and "dark mode" not in found

    assert manage.invoke({"action": "delete", "id": memory_id}, config) == f"Deleted memory {memory_id}"
    assert store.get(ns, memory_id) is None
    [trains] = store.search(ns)
    assert trains.value == {"content": "User books trains, never flights"}

    # the same through an agent: a scripted chat model (no LLM) calls the tool as a model would
    from langchain.agents import create_agent          # langchain: a dependency of langmem
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage

    class Scripted(FakeMessagesListChatModel):
        def bind_tools(self, tools, **kwargs):      # the script already knows which tool it calls
            return self

    def agent(*calls: dict):
        script = [AIMessage("", tool_calls=[{"name": "manage_memory", "args": args, "id": f"call-{i}"}])
                  for i, args in enumerate(calls)]
        return create_agent(Scripted(responses=[*script, AIMessage("Noted.")]), tools=[manage], store=store)

    out = agent({"content": "User drinks green tea", "action": "create"}).invoke(
        {"messages": [("user", "I drink green tea")]}, config)
    tea = out["messages"][2].content.split()[-1]
    assert out["messages"][2].content == f"created memory {tea}" and out["messages"][-1].content == "Noted."
    agent({"content": "User drinks black tea", "action": "update", "id": tea},
          {"action": "delete", "id": trains.key}).invoke({"messages": [("user", "Black tea now; I fly again")]}, config)
    assert [(i.key, i.value["content"]) for i in store.search(ns)] == [(tea, "User drinks black tea")]
    store.close()


def test_langchain_runnable_keeps_history_in_memstream(api_url, settings):
    pytest.importorskip("langchain_core")
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
    from langchain_core.runnables import RunnableLambda
    from langchain_core.runnables.history import RunnableWithMessageHistory

    from memstream.integrations.langchain_history import MemstreamChatMessageHistory, MemstreamHistories

    key = make_key(settings, "acme", RW, name="langchain")
    user = unique_user("lc")
    prompts = []     # what the model was shown: the history must come back from memstream

    def spy(prompt_value):
        prompts.append(prompt_value.to_messages())
        return prompt_value

    prompt = ChatPromptTemplate.from_messages([("system", "You remember."), MessagesPlaceholder("history"),
                                               ("human", "{question}")])
    model = FakeListChatModel(responses=["Lisbon is lovely.", "You live in Lisbon."])
    histories = MemstreamHistories(api_url, user, api_key=key, wait_s=60)
    chat = RunnableWithMessageHistory(prompt | RunnableLambda(spy) | model, histories,
                                      input_messages_key="question", history_messages_key="history")
    config = {"configurable": {"session_id": "chat-1"}}
    assert chat.invoke({"question": "I live in Lisbon"}, config).content == "Lisbon is lovely."
    assert chat.invoke({"question": "Where do I live?"}, config).content == "You live in Lisbon."

    # the second call's prompt carried the first exchange, read from the session window
    assert [(m.type, m.content) for m in prompts[1]] == [
        ("system", "You remember."), ("human", "I live in Lisbon"), ("ai", "Lisbon is lovely."),
        ("human", "Where do I live?")]
    history = histories("chat-1")
    assert [(m.type, m.content) for m in history.messages] == [
        ("human", "I live in Lisbon"), ("ai", "Lisbon is lovely."), ("human", "Where do I live?"),
        ("ai", "You live in Lisbon.")]
    # the turns went through the pipeline: memory learned from what the user said (not from the AI)
    api = MemoryApi(api_url, api_key=key)
    token = histories._positions[(user, "chat-1")]
    assert [h["content"] for h in api.recall(user, "where does the user live?", k=3, after=token, wait_s=60)] \
        == ["User lives in Lisbon"]
    # the history is the key's tenant's: another tenant's key sees an empty session
    stranger = MemstreamChatMessageHistory(api_url, user, "chat-1", api_key=make_key(settings, "globex", RW))
    assert stranger.messages == []
    stranger.clear()     # and clearing it there clears the other tenant's session, not this one
    assert len(history.messages) == 4
    histories.close()
    api.close()


def test_langchain_history_clear_forgets_the_session(api_url, settings):
    """clear() forgets one session (session.forgotten, DELETE /v1/users/{user}/sessions/{session}): its
    window is empty and the memories learned in it are gone, another session of the same user and
    its memories stay, a message added afterwards starts the session afresh, and the session
    windows and memories replay to exactly what the live projectors hold."""
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, HumanMessage

    from memstream.integrations.langchain_history import MemstreamHistories
    from replay.verify import verify

    key = make_key(settings, "acme", RW, name="langchain-clear")
    user = unique_user("lc-clear")
    histories = MemstreamHistories(api_url, user, api_key=key, wait_s=60)
    api = MemoryApi(api_url, api_key=key)
    cleared, kept = histories("trip"), histories("hobbies")
    cleared.add_messages([HumanMessage("I live in Lisbon"), AIMessage("Lisbon is lovely.")])
    kept.add_messages([HumanMessage("I like kayaking"), AIMessage("Kayaking is fun.")])

    def memories(token: str) -> dict[str, str]:
        page = api.client.get_all(user, status="all", after=token, wait_s=60)
        return {m.content: m.session for m in page.memories}

    def learnt() -> dict[str, str]:
        token = histories._positions[(user, "hobbies")]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            got = memories(token)
            if {"User lives in Lisbon", "User likes kayaking"} <= got.keys():
                return got
            time.sleep(0.5)
        raise AssertionError(f"the pipeline did not learn both memories: {got}")
    assert learnt()["User lives in Lisbon"] == "trip"

    cleared.clear()
    assert cleared.messages == []       # read after the clear's position (the history keeps it)
    assert [(m.type, m.content) for m in kept.messages] == [("human", "I like kayaking"), ("ai", "Kayaking is fun.")]
    after = memories(histories._positions[(user, "trip")])
    assert "User lives in Lisbon" not in after and after["User likes kayaking"] == "hobbies", after
    assert "User lives in Lisbon" not in json.dumps(api.profile(user))

    cleared.add_messages([HumanMessage("Hello again")])    # the session starts afresh
    assert [m.content for m in cleared.messages] == ["Hello again"]
    # the API answers what it forgot, and refuses a reader and a bad session id with a 4xx
    reader = MemoryApi(api_url, api_key=make_key(settings, "acme", ("memory:read",), name="lc-reader"))
    with pytest.raises(AccessDenied, match="memory:write"):
        reader.forget_session(user, "hobbies")
    with pytest.raises(InvalidInput):
        api.forget_session(user, "bad\x00session")
    resp = httpx.delete(f"{api_url}/v1/users/{user}/sessions/%00x", headers={"Authorization": f"Bearer {key}"})
    assert resp.status_code == 422, resp.text

    report = verify(settings, ["session-windows", "pgvector-items"], progress=False)
    assert report.ok, report.as_dict()
    reader.close()
    histories.close()
    api.close()
