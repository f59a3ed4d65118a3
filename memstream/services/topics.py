"""The namespace's topics: created when missing (memstream/bus.py ensure_topics: infinite
retention, the namespace's partitions, its ACLs); `memstream topics create` and start-up use it."""
from __future__ import annotations


def create_topics(settings) -> list[str]:
    """The topics it created (none when all exist)."""
    from memstream.bus import ensure_topics
    return ensure_topics(settings)
