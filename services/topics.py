"""The namespace's topics: created when missing (adapters/bus.py ensure_topics: infinite
retention, the namespace's partitions, its ACLs); `memstream topics create` and start-up use it."""
from __future__ import annotations


def create_topics(settings) -> list[str]:
    """The topics it created (none when all exist)."""
    from adapters.bus import ensure_topics
    return ensure_topics(settings)
