"""The LLM channel against a real model: Gemma 3 270M served by `memstream llm serve`
(llama.cpp's OpenAI-compatible server, the optional extra `llm`), answers constrained by each
call's JSON Schema. No scripted answers here: what the model says is its own."""
from __future__ import annotations

import os
import socket
import subprocess
import time

import httpx
import pytest

from memstream.app.llm_serve import MODEL_ALIAS, client_env
from projections.queries import memories
from schemas.codec import decode
from streams.llm_channel import LlmClient
from tests.helpers import WATCHED, unique_user, wait_for
from tests.kafka_helpers import read_all

NURSE = ("Hi! I'm a nurse and I work night shifts. I'm allergic to peanuts. "
         "Last week I adopted a cat named Miso.")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def local_llm(settings):
    pytest.importorskip("llama_cpp", reason='the optional extra: pip install -e ".[llm]"')
    from memstream.app.workers import worker_command
    port = free_port()
    log_path = settings.stack_dir / "logs" / f"{settings.namespace}-llm-serve.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(worker_command("x")[:3] + ["llm", "serve", "--port", str(port), "--n-ctx", "4096"],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def up():
            assert proc.poll() is None, log_path.read_text()[-3000:]
            try:
                return httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False
        wait_for(up, timeout=180, interval=1.0, what="the local LLM server")
        yield client_env("127.0.0.1", port)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_the_model_answers_in_the_schema(local_llm):
    import asyncio
    llm = LlmClient(local_llm["MEMSTREAM_LLM_BASE_URL"], MODEL_ALIAS, timeout_s=120, max_attempts=1,
                    response_format=local_llm["MEMSTREAM_LLM_RESPONSE_FORMAT"])
    started = time.monotonic()
    facts = asyncio.run(llm.extract(NURSE))
    took = time.monotonic() - started
    print(f"\nlocal LLM: {len(facts or [])} facts in {took:.1f}s: {[f.content for f in facts or []]}")
    assert facts is not None, llm.counters()             # a valid answer for the schema, first time
    assert llm.counters()["invalid_outputs"] == 0 and llm.counters()["failures"] == 0


@pytest.mark.stack
def test_the_llm_worker_publishes_the_models_facts(settings, keys, client, pipeline, local_llm):
    from memstream.app.workers import LLM_WORKER, stop_pipeline, worker_command
    log_path = settings.stack_dir / "logs" / f"{settings.namespace}-{LLM_WORKER}-local.log"
    env = {**os.environ, **local_llm, "MEMSTREAM_NAMESPACE": settings.namespace, "MEMSTREAM_LLM_TIMEOUT_S": "120",
           "MEMSTREAM_LLM_CONCURRENCY": "1"}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(worker_command(LLM_WORKER), stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    WATCHED[LLM_WORKER] = proc
    try:
        user = unique_user("gemma")
        client.record_turn(user, "s1", "user", "I work as a firefighter in Oslo and I have two daughters.")

        def llm_facts():
            return [env for m in read_all(settings, settings.topic("facts")) if m.key() == user.encode()
                    for env in [decode(m.value(), keys)] if env.type == "fact.extracted" and env.data.channel == "llm"]
        # what the model says is its own (temperature 0); the channel records it once, as facts
        facts = wait_for(llm_facts, timeout=300, interval=1.0, what="the local model's facts")
        print(f"\nllm facts: {[(f.data.content, f.data.category) for f in facts]}")
        assert all(f.data.model == MODEL_ALIAS and len(f.data.embedding) == settings.embed_dim for f in facts)
        want = {f.data.content for f in facts}      # decided by the processor like any fact
        wait_for(lambda: want <= {m["content"] for m in memories(settings, user)}, timeout=60,
                 what="memories from the model's facts")
        assert proc.poll() is None
    finally:
        WATCHED.pop(LLM_WORKER, None)
        stop_pipeline({LLM_WORKER: proc})
