"""What a worker process's environment holds (memstream/app/workers.py)."""
from __future__ import annotations

from memstream.app.workers import worker_env
from kernel.config import get_settings


def test_workers_get_a_fixed_mmap_threshold_unless_the_caller_sets_one(monkeypatch):
    s = get_settings().model_copy(update={"namespace": "wenv"})
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    env = worker_env(s)
    assert env["MALLOC_MMAP_THRESHOLD_"] == "65536" and env["MEMSTREAM_NAMESPACE"] == "wenv"
    assert worker_env(s, {"MALLOC_MMAP_THRESHOLD_": "131072"})["MALLOC_MMAP_THRESHOLD_"] == "131072"
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "262144")
    assert worker_env(s)["MALLOC_MMAP_THRESHOLD_"] == "262144"
    assert worker_env(s, {"MEMSTREAM_NAMESPACE": "other"})["MEMSTREAM_NAMESPACE"] == "wenv"
