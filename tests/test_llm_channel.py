"""The LLM channel: the "llm-extractor" worker end to end on the real stack, against a scripted
OpenAI-compatible server (the only stand-in: the remote LLM). The client alone, in-process:
tests/fast/test_llm_client.py."""
from __future__ import annotations

import os
import subprocess

import pytest

from kernel.ids import derived_id
from projections.queries import memories, preferences
from schemas.codec import decode
from streams.llm_channel import CLASSIFY_PROMPT
from tests.fast.test_llm_client import NAME_FACT
from tests.helpers import WATCHED, unique_user, wait_for
from tests.kafka_helpers import read_all
from tests.llm_server import Reply, ScriptedLLM, system_text, user_text


# -- (b, c) the llm-extractor worker on the real stack ----------------------------------------

EN_TURN = "My name is Alice. I work as a nurse at the city hospital, and last month I flew to Tokyo for a conference."
ZH_TURN = "我叫王芳，我是一名护士，上个月去东京开会了。"
BACK_TURN = "I speak three languages fluently."
EXTRACTIONS = {
    EN_TURN: [NAME_FACT,  # the rule channel has "name" already: dropped
              {"key": "occupation", "value": "nurse", "content": "User works as a nurse at the city hospital",
               "category": "fact", "tags": ["work"], "importance": 0.8},  # rules say identity
              {"key": None, "value": None, "content": "User flew to Tokyo for a conference last month",
               "tags": ["travel"], "importance": 0.4}],  # no category: the classify call decides
    ZH_TURN: [{"key": "name", "value": "王芳", "content": "用户叫王芳", "category": "identity", "importance": 0.9},
              {"key": "occupation", "value": "护士", "content": "用户是一名护士", "category": "fact", "importance": 0.8},
              {"key": None, "content": "用户上个月去东京开会", "category": "episodic", "tags": ["travel"], "importance": 0.4}],
    BACK_TURN: [{"key": "languages", "value": "3", "content": "User speaks three languages fluently",
                 "category": "fact", "tags": ["language"], "importance": 0.6}],
}


def scripted_answer(body: dict) -> Reply:
    text = user_text(body)
    if system_text(body) == CLASSIFY_PROMPT:
        return Reply.json({"category": "episodic", "tags": ["event"], "slot_hint": None})
    return Reply.json({"facts": EXTRACTIONS.get(text, [])})


@pytest.fixture(scope="module")
def llm_server():
    server = ScriptedLLM(scripted_answer).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def llm_worker(settings, pipeline, llm_server):
    """Just the llm-extractor worker, started like start_pipeline starts workers, pointed at the server."""
    from memstream.app.workers import LLM_WORKER, stop_pipeline, worker_command
    log_path = settings.stack_dir / "logs" / f"{settings.namespace}-{LLM_WORKER}.log"
    env = {**os.environ, "MEMSTREAM_NAMESPACE": settings.namespace, "MEMSTREAM_LLM_BASE_URL": llm_server.base_url,
           "MEMSTREAM_LLM_MODEL": "scripted-model", "MEMSTREAM_LLM_TIMEOUT_S": "5"}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(worker_command(LLM_WORKER), stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    WATCHED[LLM_WORKER] = proc
    yield proc
    WATCHED.pop(LLM_WORKER, None)
    stop_pipeline({LLM_WORKER: proc})
    if b"Traceback" in log_path.read_bytes():
        print(f"\n--- {log_path} ---\n" + log_path.read_text()[-4000:])


def facts_of(settings, keys, user):
    """The user's fact.extracted events (the facts topic also carries each turn's relations.extracted)."""
    return [env for m in read_all(settings, settings.topic("facts")) if m.key() == user.encode()
            for env in [decode(m.value(), keys)] if env.type == "fact.extracted"]


def llm_facts_of(settings, keys, user):
    return [f for f in facts_of(settings, keys, user) if f.data.channel == "llm"]


@pytest.mark.stack
@pytest.mark.parametrize("turn, rule_content, expected, kept", [
    # English: the rules read the name and, since the ontology's work slots, the occupation and the
    # employer ("I work as a nurse at the city hospital"): the LLM's occupation fact (position 1) is
    # dropped like its name fact (0), one key per slot whichever channel said it first.
    (EN_TURN, "User's name is Alice", {"User flew to Tokyo for a conference last month": "episodic"}, (2,)),
    (ZH_TURN, "用户叫王芳", {"用户是一名护士": "identity", "用户上个月去东京开会": "episodic"}, (1, 2)),
], ids=["en", "zh"])
def test_llm_facts_reach_the_facts_topic_and_memory(settings, keys, client, llm_worker, turn, rule_content, expected,
                                                    kept):
    user = unique_user("llm")
    client.record_turn(user, "s1", "user", turn)
    facts = wait_for(lambda: len(f := llm_facts_of(settings, keys, user)) == len(expected) and f, timeout=120,
                     what="the LLM channel's facts")
    # 1. what the LLM said, minus what the rules had, classified rules-first
    assert {f.data.content: f.data.category for f in facts} == expected
    assert all(f.data.model == "scripted-model" and f.data.rule is None for f in facts)
    assert all(len(f.data.embedding) == settings.embed_dim and f.data.embed_model == settings.embed_model for f in facts)
    assert "name" not in {f.data.key for f in facts}
    # 2. deterministic ids: the position in the LLM's answer (0 was dropped)
    turn_id = facts[0].data.source_turn
    assert sorted(f.id for f in facts) == sorted(derived_id(turn_id, f"llm-fact:{i}") for i in kept)
    assert all(f.data.fact_id == f.id and f.causation == turn_id for f in facts)
    # 3. the rule channel's own fact is there once, from the rules (the offline channel's statements follow it)
    offline = [f.data.content for f in facts_of(settings, keys, user) if f.data.channel == "rule"]
    assert offline[0] == rule_content and offline.count(rule_content) == 1
    # 4. the memory processor turns them into memories like any fact; a slot the offline channel's
    #    statement already holds with the same value stays one memory (reinforced, not doubled)
    slots = {f.data.content: (f.data.key, f.data.value) for f in facts if f.data.key}

    def remembered(m) -> bool:
        contents = {r["content"] for r in m}
        held = {(r["key"], r["value"]) for r in m if r["key"] and r["status"] == "active"}
        return rule_content in contents and all(c in contents or slots.get(c) in held for c in expected)
    mems = wait_for(lambda: (m := memories(settings, user)) and remembered(m) and m,
                    timeout=60, what="memories from both channels")
    by_content = {m["content"]: m["category"] for m in mems if m["content"] in expected}
    assert by_content and by_content == {c: k for c, k in expected.items() if c in by_content}


@pytest.mark.stack
def test_endpoint_down_rule_channel_goes_on_and_llm_worker_survives(settings, keys, client, llm_server, llm_worker):
    log_path = settings.stack_dir / "logs" / f"{settings.namespace}-llm-extractor.log"
    seen = log_path.stat().st_size
    llm_server.stop()
    try:
        user = unique_user("down")
        client.record_turn(user, "s1", "user", "I like hiking. Please don't call me after 9pm.")
        # 1. the rule channel does not wait for the LLM
        prefs = wait_for(lambda: (p := preferences(settings, user)) and {"likes:hiking", "constraint:dont:call me after 9pm"}
                         <= {r["key"] for r in p} and p, timeout=60,
                         what="the rule channel's preferences")
        assert {p["key"]: p["value"] for p in prefs}["constraint:dont:call me after 9pm"] == "true"
        # 2. the LLM worker tried, gave up, logged it, and is still running
        wait_for(lambda: "giving up" in log_path.read_bytes()[seen:].decode(errors="replace"), timeout=90,
                 what="the LLM worker to log its failure")
        assert llm_worker.poll() is None
        assert llm_facts_of(settings, keys, user) == []
    finally:
        llm_server.start()  # the same port again
    # 3. once the endpoint is back, the same worker goes on producing LLM facts
    user = unique_user("back")
    client.record_turn(user, "s1", "user", BACK_TURN)
    (fact,) = wait_for(lambda: llm_facts_of(settings, keys, user), timeout=90, what="an LLM fact after recovery")
    assert (fact.data.content, fact.data.category) == ("User speaks three languages fluently", "fact")
    assert llm_worker.poll() is None
