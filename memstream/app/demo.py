"""The demo: stack up, pipeline up, a short conversation in, what memory learned out."""
from __future__ import annotations

import time
from datetime import datetime, timezone

from memstream import stack
from kernel.config import Settings
from adapters.sdk import MemoryClient
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
EXPECTED_PREFS = 6  # name, likes:咖啡, likes:香菜, occupation, likes:hiking, location (北京 → Shanghai: version 2)
QUESTIONS = ("Where does the user live now?", "What pet does the user have?")


def _learned(settings: Settings, user: str) -> bool:
    prefs = preferences(settings, user)
    return (len(prefs) >= EXPECTED_PREFS and any(p["version"] > 1 for p in prefs)
            and any("Miso" in m["content"] for m in memories(settings, user)))


def _stage_lag(settings: Settings) -> str:
    """What each stage still has to read, e.g. "extractor 0, memory 3, projector.pgvector-items 5"."""
    from adapters.lag import consumer_lag, lag_by_group
    try:
        by_group = lag_by_group(consumer_lag(settings, timeout=5.0))
    except Exception as exc:  # noqa: BLE001 - progress only: say why it is missing and go on
        return f"lag unknown ({type(exc).__name__})"
    prefix = settings.namespace + "."
    shown = {g.removeprefix(prefix): n for g, n in by_group.items()}
    return ", ".join(f"{g} {n}" for g, n in sorted(shown.items())) or "no stage has committed yet (workers starting)"


def _wait_for_memory(settings: Settings, user: str, procs: dict, timeout: float) -> None:
    """Wait until memory holds what the conversation said, telling what the wait is on every few
    seconds (records each stage has still to read); on a time-out, say where to look and what to try."""
    started = last_report = time.monotonic()
    while not _learned(settings, user):
        dead = [n for n, p in procs.items() if p.poll() is not None]
        if dead:
            raise SystemExit(f"demo: worker(s) {', '.join(dead)} exited; their logs: "
                             + ", ".join(str(settings.stack_dir / "logs" / f"{settings.namespace}-{n}.log") for n in dead))
        waited = time.monotonic() - started
        if waited > timeout:
            raise SystemExit(
                f"demo: memory did not catch up within {timeout:.0f}s (still to read: {_stage_lag(settings)}). "
                f"`memstream pipeline status` says what each worker waits for; their logs are in "
                f"{settings.stack_dir / 'logs'}. On a loaded machine, run it again with a longer wait: "
                f"MEMSTREAM_DEMO_TIMEOUT_S={int(timeout * 3)} ./dev demo")
        if time.monotonic() - last_report >= 5.0:
            last_report = time.monotonic()
            print(f"  … waiting for memory ({waited:.0f}s): still to read: {_stage_lag(settings)}", flush=True)
        time.sleep(0.25)


def _quiet_libraries() -> None:
    """The demo's output is for people: librdkafka's transient warnings (a coordinator still
    loading, retried by itself), faust and the Neo4j driver's notices stay out of it; errors still
    show. The workers log everything to their own files."""
    import logging
    for name in ("memstream.librdkafka", "faust", "mode", "aiokafka", "neo4j", "neo4j.notifications"):
        logging.getLogger(name).setLevel(logging.ERROR)


def run_demo(settings: Settings, timeout: float | None = None) -> None:
    timeout = timeout or settings.demo_timeout_s
    _quiet_libraries()
    if not stack.installed():
        stack.install()        # `./dev demo` installed it already: its lines are not printed twice
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
        _wait_for_memory(settings, user, procs, timeout)
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
