"""The TypeScript client (clients/typescript, npm package memstream-client) against the real API.

Installs its dev dependencies (`npm ci`, only when node_modules is missing or older than
package-lock.json), builds it (`tsc`, which fails when the client drifts from src/openapi.d.ts),
checks that src/openapi.d.ts is what the server's OpenAPI document generates now, and runs its
node:test suite against an API of this test session (tests/test_api.py's `api_url`) with an admin
key and a key bound to one end user. Skipped where node and npm are not installed.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.auth_helpers import make_key
from tests.helpers import unique_user
from tests.test_api import api_url  # noqa: F401  (the API in a subprocess, module-scoped)

PKG = Path(__file__).resolve().parent.parent / "clients" / "typescript"
STAMP = PKG / "node_modules" / ".memstream-lock.sha256"

pytestmark = pytest.mark.skipif(not (shutil.which("node") and shutil.which("npm")),
                                reason="node and npm are not installed (the TypeScript client needs Node >= 18)")


def npm(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["npm", *args], cwd=PKG, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, timeout=timeout)


def ok(proc: subprocess.CompletedProcess, what: str) -> str:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{what} exited {proc.returncode}:\n{out[-12000:]}"
    return out


@pytest.fixture(scope="module")
def built():
    """node_modules as package-lock.json says (npm ci when it is missing or stale), then dist/."""
    lock = hashlib.sha256((PKG / "package-lock.json").read_bytes()).hexdigest()
    if not STAMP.exists() or STAMP.read_text().strip() != lock:
        ok(npm("ci", "--no-audit", "--no-fund"), "npm ci")
        STAMP.write_text(lock)
    ok(npm("run", "build"), "npm run build (tsc: the client against src/openapi.d.ts)")
    return PKG


def test_openapi_types_match_the_server(built):
    """src/openapi.d.ts is generated from the server's OpenAPI document: a route or field changed
    without regenerating it (npm run openapi) fails here."""
    ok(npm("run", "openapi:check", env={"MEMSTREAM_PYTHON": sys.executable}, timeout=120), "npm run openapi:check")


def test_the_typescript_client_against_the_api(built, api_url, admin_key, settings):  # noqa: F811
    bound_user = unique_user("tsbound")
    bound_key = make_key(settings, scopes=("memory:read", "memory:write"), user=bound_user, name="tests-ts-bound")
    out = ok(npm("test", env={"MEMSTREAM_API_URL": api_url, "MEMSTREAM_API_KEY": admin_key,
                              "MEMSTREAM_TEST_BOUND_USER": bound_user, "MEMSTREAM_TEST_BOUND_KEY": bound_key}),
             "npm test (node --test)")
    # every part ran: nothing skipped for want of an API or a bound key
    assert "# SKIP" not in out, out[-12000:]
    assert "# fail 0" in out, out[-12000:]
