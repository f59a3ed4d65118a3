"""Prompt context: seven slots filled concurrently, fitted to a token budget, trimmed by priority.

Slots, most important first: constraints (never dropped), profile, recall, the people and places
the question names (query/people.py, #26), task memory, tool state, recent conversation. The answer is the text and a per-slot account of what was kept and
what was cut.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from domain.token_budget import Slot, assemble
from adapters.metrics import timed_query
from projections.queries import session_window, task_steps
from query.people import people_lines
from query.profile import profile
from query.recall import RecallRequest, recall
from query.store import ReadModels

DEFAULT_BUDGETS = {"constraints": 200, "profile": 200, "recall": 400, "people": 150, "task": 200, "tool_state": 100,
                   "recent": 300}
TITLES = {"constraints": "Constraints", "profile": "About the user", "recall": "Relevant memories",
          "people": "People and places",
          "task": "Task so far", "tool_state": "Tool state", "recent": "Recent conversation"}


@dataclass(frozen=True)
class ContextRequest:
    user: str
    query: str
    session: str | None = None
    task: str | None = None
    budget: int = 1200
    slot_budgets: dict[str, int] = field(default_factory=dict)
    k: int = 8
    filters: dict | None = None           # the recall slot's Mem0-style filters (agent_id, run_id, metadata …)


def _constraints_and_profile(models: ReadModels, user: str) -> tuple[list[str], list[str], set[str]]:
    p = profile(models, user)
    constraints = [m["content"] for m in p["policy"]]
    about = [m["content"] for m in p["identity"] + p["preference"]]
    return constraints, about, {m["memory_id"] for c in ("policy", "identity", "preference") for m in p[c]}


def _task(models: ReadModels, req: ContextRequest) -> tuple[list[str], list[str]]:
    if not req.task:
        return [], []
    steps = task_steps(models.settings, req.user, req.task, k=models.settings.task_buffer_size)
    done = [f"[{s['status']}] {s['content']}" for s in steps]
    failing = [f"{s['kind']} failed: {s['content']}" for s in steps if s["status"] == "failed"]
    return done, failing


def _recent(models: ReadModels, req: ContextRequest) -> list[str]:
    if not req.session:
        return []
    return [f"{m['role']}: {m['content']}" for m in session_window(models.settings, req.user, req.session)]


@timed_query("context")   # memstream_query_seconds{query="context"}
async def build_context(models: ReadModels, req: ContextRequest) -> dict:
    # 1. fill the slots concurrently (each is an independent read)
    (constraints, about, profiled), hits, people, (done, failing), recent = await asyncio.gather(
        asyncio.to_thread(_constraints_and_profile, models, req.user),
        asyncio.to_thread(recall, models, RecallRequest(req.user, req.query, k=req.k, filters=req.filters)),
        asyncio.to_thread(people_lines, models, req.user, req.query),
        asyncio.to_thread(_task, models, req),
        asyncio.to_thread(_recent, models, req))
    # 2. recall adds what the profile does not already say; tool failures remembered from before
    recalled = [h.content for h in hits if h.memory_id not in profiled]
    tool_state = failing + [h.content for h in hits if h.category == "tool_failure"]
    budgets = {**DEFAULT_BUDGETS, **req.slot_budgets}
    slots = [Slot("constraints", TITLES["constraints"], constraints, budgets["constraints"], required=True),
             Slot("profile", TITLES["profile"], about, budgets["profile"]),
             Slot("recall", TITLES["recall"], recalled, budgets["recall"]),
             Slot("people", TITLES["people"], people, budgets["people"]),
             Slot("task", TITLES["task"], done[::-1], budgets["task"], newest_first=True),
             Slot("tool_state", TITLES["tool_state"], tool_state, budgets["tool_state"]),
             Slot("recent", TITLES["recent"], recent[::-1], budgets["recent"], newest_first=True)]
    # 3. fit and trim by priority
    text, account = assemble(slots, req.budget)
    return {"text": text, "slots": account}
