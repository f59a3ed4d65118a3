"""`pip install .` ships what memstream needs: every package, its data, the entry point and the extras.

The wheel is built offline (--no-deps --no-build-isolation: the venv's own setuptools) from a copy of
the sources in a temporary folder, so the shared checkout gets no build/ folder and a stale build/lib
cannot put deleted modules into the wheel. Then the unpacked wheel alone, not the checkout, must
import the CLI behind the entry point and find the stack's inputs. No services needed; ~10 s.
"""
from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from tests.product_packages import product_packages

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = product_packages()
STACK_FILES = ("kafka/pom.xml", "neo4j/pom.xml", "neo4j/Launcher.java", "postgres/install-pgvector.sh")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "-w", str(out), "--no-deps",
                           "--no-build-isolation", "-q"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr   # setuptools too old? ./dev installs >=68
    (whl,) = out.glob("memstream-*-py3-none-any.whl")
    return whl


def canonical(requirement: str) -> str:
    return requirement.lower().replace("_", "-")


def sources(pkg: str, pattern: str) -> set[str]:
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / pkg).rglob(pattern) if "__pycache__" not in p.parts}


def test_wheel_holds_every_module_and_the_package_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    # every module of every package: a folder without __init__.py would be silently left out by find
    missing = set().union(*(sources(pkg, "*.py") for pkg in PACKAGES)) - names
    assert not missing, f"modules not in the wheel: {sorted(missing)}"
    assert {"memstream/integrations/langgraph_store.py", "memstream/integrations/langchain_history.py"} <= names
    # package data read at run time: the JSON Schemas, and what `memstream stack install|up` needs
    assert sources("schemas", "json/*.json") <= names and "schemas/json/envelope.json" in names
    assert {f"memstream/stack/files/{f}" for f in STACK_FILES} <= names
    # and nothing that is not the product
    assert not [n for n in names if n.split("/")[0] in ("tests", "bench", "docs", ".stack", ".venv", "clients",
                                                        "memstream_client")]


def test_wheel_metadata_entry_point_and_extras(wheel):
    with zipfile.ZipFile(wheel) as z:
        info = next(n.split("/")[0] for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        entry = configparser.ConfigParser()
        entry.read_string(z.read(f"{info}/entry_points.txt").decode())
        meta = Parser().parsestr(z.read(f"{info}/METADATA").decode())
    assert dict(entry["console_scripts"]) == {"memstream": "memstream.app.cli:main"}
    assert {"langgraph", "langchain", "test"} <= set(meta.get_all("Provides-Extra"))
    requires = meta.get_all("Requires-Dist")
    assert any(r.startswith("langgraph>=") and 'extra == "langgraph"' in r for r in requires), requires
    assert any(r.startswith("langchain-core>=") and 'extra == "langchain"' in r for r in requires), requires
    # the HTTP SDK is the thin client's distribution (clients/python), a dependency, not a copy in this wheel
    assert any(canonical(r).startswith("memstream-client") and "extra ==" not in r for r in requires), requires
    # the adapters' frameworks are extras, never what a plain `pip install memstream` pulls in
    assert not [r for r in requires if r.startswith("lang") and "extra ==" not in r]


def test_unpacked_wheel_runs_the_entry_point_without_the_checkout(wheel, tmp_path):
    zipfile.ZipFile(wheel).extractall(tmp_path)
    probe = ("import sys, memstream; from memstream.app.cli import main; from memstream.stack import prereqs\n"
             "print(memstream.__file__); print(prereqs.STACK_SRC)\n"
             "assert (prereqs.STACK_SRC / 'neo4j' / 'Launcher.java').is_file()\n"
             "from kernel.config import Settings\n"
             "print('stack_dir', Settings().stack_dir)\n"
             "sys.argv = ['memstream', '--help']; main()\n")
    # cwd = the unpacked wheel: it comes first on sys.path, before the checkout's editable install
    proc = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.splitlines()[:2]
    assert first.startswith(str(tmp_path)) and second.startswith(str(tmp_path)), proc.stdout
    assert "stack" in proc.stdout and "usage: memstream" in proc.stdout
    # an installed wheel keeps its stack in a per-user folder, not inside the installation
    stack_dir = next(line for line in proc.stdout.splitlines() if line.startswith("stack_dir ")).split(" ", 1)[1]
    assert not stack_dir.startswith(str(tmp_path)) and stack_dir.endswith(".local/share/memstream"), stack_dir
