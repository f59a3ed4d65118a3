"""The LLM channel's client (streams/llm_channel.py), in-process through the real openai package,
against a scripted OpenAI-compatible server (the only stand-in: the remote LLM): JSON mode,
retries, timeouts, bounded concurrency. The llm-extractor worker on the real stack:
tests/test_llm_channel.py."""
from __future__ import annotations

import asyncio
import time

from streams.llm_channel import CLASSIFY_PROMPT, EXTRACTION_PROMPT, LlmClient
from tests.llm_server import Reply, ScriptedLLM, system_text, user_text

NAME_FACT = {"key": "name", "value": "Alice", "content": "User's name is Alice", "category": "identity",
             "tags": ["name"], "slot_hint": "name", "importance": 0.9}


def run(coro):
    return asyncio.run(coro)


async def _with_client(server: ScriptedLLM | None, fn, *, base_url=None, **kw):
    llm = LlmClient(base_url or server.base_url, "scripted-model", backoff_s=kw.pop("backoff_s", 0.05), **kw)
    try:
        return llm, await fn(llm)
    finally:
        await llm.close()


def test_valid_output_is_parsed_and_the_request_is_json_mode():
    with ScriptedLLM() as server:
        server.push(Reply.json({"facts": [NAME_FACT, {"content": "User flew to Tokyo", "category": "hobby"}]}))
        llm, facts = run(_with_client(server, lambda c: c.extract("My name is Alice. I flew to Tokyo.")))
    assert [f.content for f in facts] == ["User's name is Alice", "User flew to Tokyo"]
    assert (facts[0].key, facts[0].value, facts[0].category, facts[0].importance) == ("name", "Alice", "identity", 0.9)
    assert facts[1].category is None  # an unknown label is left to classification, not fatal
    (req,) = server.requests
    assert req["body"]["model"] == "scripted-model"
    assert req["body"]["response_format"] == {"type": "json_object"}
    assert system_text(req["body"]) == EXTRACTION_PROMPT
    assert user_text(req["body"]) == "My name is Alice. I flew to Tokyo."
    assert llm.counters() == {"calls": 1, "retries": 0, "timeouts": 0, "invalid_outputs": 0, "failures": 0}


def test_classify_uses_its_own_prompt():
    with ScriptedLLM() as server:
        server.push(Reply.json({"category": "episodic", "tags": ["travel"], "slot_hint": None}))
        _, out = run(_with_client(server, lambda c: c.classify("用户上个月去东京开会")))
    assert out == {"category": "episodic", "tags": ["travel"], "slot_hint": None}
    assert system_text(server.requests[0]["body"]) == CLASSIFY_PROMPT


def test_invalid_json_is_asked_once_more_then_given_up():
    with ScriptedLLM() as server:
        server.push(Reply("this is not json"), Reply.json({"facts": [{"content": ""}]}))  # bad JSON, then bad schema
        llm, facts = run(_with_client(server, lambda c: c.extract("I like tea")))
    assert facts is None
    assert len(server.requests) == 2
    assert llm.counters() == {"calls": 2, "retries": 1, "timeouts": 0, "invalid_outputs": 2, "failures": 1}
    # The re-ask shows the model its own answer.
    assert [m["role"] for m in server.requests[1]["body"]["messages"]] == ["system", "user", "assistant", "user"]
    assert server.requests[1]["body"]["messages"][2]["content"] == "this is not json"


def test_invalid_json_then_a_valid_answer_is_used():
    with ScriptedLLM() as server:
        server.push(Reply('{"facts": [oops'), Reply.json({"facts": [NAME_FACT]}))
        llm, facts = run(_with_client(server, lambda c: c.extract("My name is Alice")))
    assert [f.key for f in facts] == ["name"]
    assert (llm.invalid_outputs, llm.retries, llm.failures) == (1, 1, 0)


def test_server_errors_are_retried_with_backoff_then_counted_as_a_failure():
    with ScriptedLLM() as server:
        server.push(Reply(status=500), Reply(status=500), Reply(status=503))
        llm, facts = run(_with_client(server, lambda c: c.extract("I like tea"), max_attempts=3, backoff_s=0.2))
    assert facts is None
    assert llm.counters() == {"calls": 3, "retries": 2, "timeouts": 0, "invalid_outputs": 0, "failures": 1}
    t = [r["at"] for r in server.requests]
    # Equal jitter: retry n waits between half and all of backoff_s * 2**(n-1).
    assert 0.1 <= t[1] - t[0] < 0.2 + 0.5
    assert 0.2 <= t[2] - t[1] < 0.4 + 0.5


def test_a_server_error_then_success_recovers():
    with ScriptedLLM() as server:
        server.push(Reply(status=500), Reply.json({"facts": [NAME_FACT]}))
        llm, facts = run(_with_client(server, lambda c: c.extract("My name is Alice")))
    assert [f.key for f in facts] == ["name"]
    assert (llm.calls, llm.retries, llm.failures) == (2, 1, 0)


def test_client_errors_are_not_retried():
    with ScriptedLLM() as server:
        server.push(Reply(status=400))
        llm, facts = run(_with_client(server, lambda c: c.extract("I like tea")))
    assert facts is None and (llm.calls, llm.retries, llm.failures) == (1, 0, 1)


def test_timeouts_are_counted_and_bounded():
    with ScriptedLLM(lambda body: Reply.json({"facts": []}, delay=1.5)) as server:
        started = time.monotonic()
        llm, facts = run(_with_client(server, lambda c: c.extract("I like tea"), timeout_s=0.3, max_attempts=2))
        took = time.monotonic() - started
    assert facts is None
    assert (llm.calls, llm.timeouts, llm.retries, llm.failures) == (2, 2, 1, 1)
    assert took < 1.5  # two 0.3 s attempts and a short backoff, not the server's 1.5 s


def test_concurrency_is_bounded():
    with ScriptedLLM(lambda body: Reply.json({"facts": [NAME_FACT]}, delay=0.2)) as server:
        async def many(llm):
            return await asyncio.gather(*(llm.extract(f"turn {i}") for i in range(8)))
        llm, results = run(_with_client(server, many, concurrency=2))
    assert all(r and r[0].key == "name" for r in results)
    assert len(server.requests) == 8
    assert server.max_in_flight == 2  # parallel, but never more than the bound


def test_endpoint_down_is_a_counted_failure_not_an_exception():
    server = ScriptedLLM().start()
    base_url = server.base_url
    server.stop()  # nothing listens on that port any more
    llm, facts = run(_with_client(None, lambda c: c.extract("I like tea"), base_url=base_url, max_attempts=2))
    assert facts is None
    assert (llm.calls, llm.retries, llm.failures) == (2, 1, 1)


def test_the_llm_channel_publishes_the_relations_it_reads_and_leaves_out_a_malformed_one():
    """#26: the LLM channel emits relations.extracted (channel llm) through the same contract as the
    offline extractor; one relation that does not fit is left out, never the turn's facts."""
    from datetime import UTC, datetime

    from kernel.config import Settings
    from adapters.embedding import make_embedder
    from schemas.codec import make_envelope
    from schemas.events import TurnRecorded
    from streams.extraction_core import LlmExtractor

    opera = {"key": "likes:opera", "value": "true", "content": "User likes opera", "category": "preference",
             "tags": ["music"], "slot_hint": "likes", "importance": 0.7}
    answer = {"facts": [opera], "relations": [
        {"subject": {"type": "user"}, "predicate": "sister",
         "object": {"type": "person", "name": "Ana", "role": "Sister", "gender": "f"}},
        {"subject": {"type": "person", "name": "Ana", "role": "sister"}, "predicate": "lives_in",
         "object": {"type": "place", "name": "Rome"}, "date": "2024-05-01"},
        {"subject": {"type": "alien"}, "predicate": "visited", "object": {"type": "place", "name": "Mars"}},
        "not a relation"]}
    turn = make_envelope(TurnRecorded(session="s1", role="user", content="I'm Alice; my sister Ana lives in Rome"),
                         user="alice", time=datetime(2026, 6, 1, tzinfo=UTC), producer="test")
    with ScriptedLLM() as server:
        server.push(Reply.json(answer))

        async def go(llm):
            return await LlmExtractor(llm, make_embedder(Settings())).facts_for([turn])
        _, events = run(_with_client(server, go))
    assert [e.type for e in events] == ["fact.extracted", "relations.extracted"]
    rel = events[1]
    assert rel.data.channel == "llm" and rel.causation == turn.id and rel.time == turn.time
    assert [(c.subject.type, c.predicate, c.object.name, c.event_date) for c in rel.data.claims] == [
        ("user", "sister", "Ana", None), ("person", "lives_in", "Rome", "2024-05-01")]
    assert rel.data.claims[0].object.role == "sister"   # "Sister" as a relation word
    assert "lives_in" in EXTRACTION_PROMPT and '"relations"' in EXTRACTION_PROMPT
