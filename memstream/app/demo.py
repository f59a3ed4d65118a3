"""The demo: stack up, pipeline up, a short conversation in, what memory learned out."""
from __future__ import annotations

import time
from datetime import datetime, timezone

from memstream import stack
from memstream.config import Settings
from memstream.sdk import MemoryClient
from memstream.app.workers import start_pipeline, stop_pipeline
from projections.queries import memories, preferences
from query.recall import RecallRequest, recall
from query.store import ReadModels

CONVERSATION = (
    ("user", "你好！我叫张三，我住在北京。"),
    ("assistant", "你好张三！有什么可以帮你？"),
    ("user", "我喜欢喝咖啡，我不喜欢香菜。"),
    ("user", "I'm a nurse and I work night shifts. Last week I adopted a cat named Miso."),
    ("user", "By the way, I like hiking and I live in Shanghai now."),
    ("assistant", "Noted — hiking, and Shanghai."),
)
EXPECTED_PREFS = 6  # name, likes:喝咖啡, likes:香菜, occupation, likes:hiking, location (北京 → Shanghai: version 2)
QUESTIONS = ("Where does the user live now?", "What pet does the user have?")


def run_demo(settings: Settings, timeout: float = 120.0) -> None:
    stack.install()
    stack.up()
    user = "demo-" + datetime.now(timezone.utc).strftime("%Y%m%d%H%M%S")
    print(f"\n== starting the pipeline (extractor, memory processor, projectors); demo user {user}")
    procs = start_pipeline(settings)
    try:
        with MemoryClient(settings) as client:
            for role, text in CONVERSATION:
                pos = client.record_turn(user, "demo-session", role, text)
                print(f"  {role:>9}: {text}   -> {pos.token()}")
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            prefs = preferences(settings, user)
            if (len(prefs) >= EXPECTED_PREFS and any(p["version"] > 1 for p in prefs)
                    and any("Miso" in m["content"] for m in memories(settings, user))):
                break
            dead = [n for n, p in procs.items() if p.poll() is not None]
            if dead:
                raise SystemExit(f"demo: worker(s) {dead} exited; see {settings.stack_dir / 'logs'}")
            time.sleep(0.25)
        else:
            raise SystemExit(f"demo: memory did not catch up within {timeout:.0f}s; see {settings.stack_dir / 'logs'}")
        print(f"\n== what memory learned ({time.monotonic() - started:.1f}s after the last publish)")
        print("preferences (key-value read model):")
        for p in preferences(settings, user):
            print(f"  {p['key']:<16} = {p['value']:<10} (version {p['version']})")
        print("memories (pgvector read model):")
        for m in memories(settings, user):
            status = "" if m["status"] == "active" else f"  [{m['status']}: superseded by a newer memory]"
            print(f"  [{m['category']:<10}] {m['content']}  (importance {m['importance']:.2f}){status}")
        models = ReadModels(settings, pool_size=2)
        try:
            for question in QUESTIONS:
                print(f"recall: {question!r}")
                for h in recall(models, RecallRequest(user, question, k=3)):
                    print(f"  {h.score:.3f}  {h.content}   why: {h.why}")
        finally:
            models.close()
        print(f"\nTry: memstream prefs --user {user} --json   |   memstream memories --user {user} --json")
    finally:
        stop_pipeline(procs)
