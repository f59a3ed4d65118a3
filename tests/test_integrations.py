"""Framework adapters (memstream/integrations/) on the real stack, pipeline and HTTP API (uvicorn).

A LangGraph graph writes through MemstreamStore and finds what the pipeline learned from it; a
LangChain runnable keeps its history in a memstream session, read back through the API. No LLM: the
chat model is langchain_core's own FakeListChatModel. Both go through API keys, so the tenant and
scope checks are the HTTP API's. Skipped only when the extras are not installed (`.[test]` pulls them in).
"""
from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
from typing import TypedDict

import httpx
import pytest

from memstream.errors import AccessDenied
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


def test_langgraph_graph_remembers_through_the_store(api_url, settings):
    pytest.importorskip("langgraph")
    from langgraph.config import get_store
    from langgraph.graph import END, START, StateGraph

    from memstream.integrations.langgraph_store import MemstreamStore, session_for

    key = make_key(settings, "acme", RW, name="langgraph")
    store = MemstreamStore(api_url, api_key=key, wait_s=60)
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
        return {"found": [(i.value["content"], i.value["category"]) for i in
                          get_store().search(ns, query=state["question"], limit=3)]}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    out = builder.compile(store=store).invoke({"said": "I live in Lisbon", "question": "where does the user live?",
                                               "found": []})
    # what the pipeline learned (the extractor's third-person fact), not the raw text put
    assert out["found"][0] == ("User lives in Lisbon", "identity"), out["found"]

    # get: the exact value put, from the key's session window
    item = store.get(ns, "home")
    assert (item.key, item.namespace, item.value) == ("home", ns, {"content": "I live in Lisbon"})
    # a search without a query: the profile memories
    assert [i.value["content"] for i in store.search(ns)] == ["User lives in Lisbon"]

    # a structured value is kept for get (a tool turn) but not handed to the extractor
    store.put(ns, "ui", {"theme": "dark", "font": 12})
    assert store.get(ns, "ui").value == {"theme": "dark", "font": 12}
    window = MemoryApi(api_url, api_key=key).session(user, session_for(ns, "ui"))
    assert [m["role"] for m in window["messages"]] == ["tool"]

    # another store (no token of its own) sees the write, now that the pipeline applied it
    assert MemstreamStore(api_url, api_key=key).get(ns, "home").value == {"content": "I live in Lisbon"}
    # tenants: the same user id under another tenant's key is someone else, with nothing stored
    other = MemstreamStore(api_url, api_key=make_key(settings, "globex", RW, name="langgraph-other"))
    assert other.get(ns, "home") is None and other.search(ns, query="where does the user live?") == []
    # scopes: a read-only key cannot put (403 from the API, before anything is published)
    reader = MemstreamStore(api_url, api_key=make_key(settings, "acme", ("memory:read",), name="langgraph-ro"))
    with pytest.raises(AccessDenied, match="memory:write"):
        reader.put(ns, "home", {"content": "I live in Madrid"})
    # what an append-only log cannot do is refused, not faked
    with pytest.raises(NotImplementedError, match="append-only"):
        store.delete(ns, "home")
    with pytest.raises(NotImplementedError):
        store.list_namespaces()

    # the async path (abatch): a second put under the same key is the new value, and memory moves on
    async def later():
        await store.aput(ns, "home", {"content": "I live in Porto"})
        got = await store.aget(ns, "home")
        hits = await store.asearch(ns, query="where does the user live?", limit=1)
        await store.aclose()
        return got, hits
    got, hits = asyncio.run(later())
    assert got.value == {"content": "I live in Porto"} and got.created_at < got.updated_at
    assert [h.value["content"] for h in hits] == ["User lives in Porto"]
    for s in (store, other, reader):
        s.close()


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
    # a session in an append-only log cannot be emptied: said so, nothing is pretended
    with pytest.raises(NotImplementedError, match="new session id"):
        history.clear()
    # the history is the key's tenant's: another tenant's key sees an empty session
    stranger = MemstreamChatMessageHistory(api_url, user, "chat-1", api_key=make_key(settings, "globex", RW))
    assert stranger.messages == []
    histories.close()
    api.close()
