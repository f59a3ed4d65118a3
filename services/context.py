"""Context: everything relevant to a query, assembled into prompt-ready text within a token budget
(query/context.py: constraints, profile, recalled memories, the task so far, the recent turns)."""
from __future__ import annotations

from services.access import Caller
from services.read_your_writes import CONTEXT_READS, wait_for
from query.context import ContextRequest, build_context


async def context(backend, caller: Caller, user: str, query: str, *, session: str | None = None,
                  task: str | None = None, budget: int = 1200, slot_budgets: dict | None = None, k: int = 8,
                  after: str | None = None, wait_s: float = 5.0, filters: dict | None = None) -> dict:
    internal = caller.internal(user)
    await wait_for(backend, after, CONTEXT_READS, wait_s, caller)
    return await build_context(backend.models, ContextRequest(internal, query, session, task, budget,
                                                              dict(slot_budgets or {}), k, filters))
