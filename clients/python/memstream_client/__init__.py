"""memstream-client: a thin, typed client for memstream's HTTP API (httpx and pydantic, nothing else).

    from memstream_client import MemstreamClient

    with MemstreamClient("http://127.0.0.1:8080", api_key="msk_…") as mem:
        pos = mem.add("I live in Lisbon and I am allergic to peanuts", user="alice")
        hits = mem.search("alice", "where does the user live?", after=pos)
        ctx = mem.context("alice", "plan a dinner", budget=800)
"""
from memstream_client._version import __version__
from memstream_client.client import AsyncMemstreamClient, MemstreamClient
from memstream_client.errors import (AccessDenied, Conflict, Gone, InvalidInput, MemstreamError, NotFound,
                                     Unavailable)
from memstream_client.models import (AddResult, Context, Entities, Entity, EntityDetail, Forgotten, Memory,
                                     MemoryHistory, MemoryPage, Message, Position, Preference, Profile, ProfileMemory,
                                     RecallHit, Relation, RelationEnd, RelationPath, Relations, SessionMessage,
                                     SessionWindow, TaskStep, TaskSteps, Turn, UpdateResult)

__all__ = [
    "__version__", "MemstreamClient", "AsyncMemstreamClient",
    "MemstreamError", "InvalidInput", "AccessDenied", "NotFound", "Conflict", "Gone", "Unavailable",
    "Position", "AddResult", "UpdateResult", "Forgotten", "Memory", "MemoryPage", "MemoryHistory", "RecallHit",
    "Context", "Profile", "ProfileMemory", "Preference", "SessionWindow", "SessionMessage", "TaskSteps",
    "TaskStep", "Message", "Turn", "Entities", "Entity", "EntityDetail", "Relation", "RelationEnd", "Relations",
    "RelationPath",
]
