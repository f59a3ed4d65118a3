"""Prerequisite checks and the install steps behind `memstream stack install`.

Each missing prerequisite is reported as ONE line saying how to get it (PrerequisiteMissing);
the CLI prints it without a stack trace.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from kernel.errors import PrerequisiteMissing, StackError

STACK_SRC = Path(__file__).parent / "files"   # package data: a wheel install has them too
PG_BIN = Path("/usr/lib/postgresql/15/bin")              # Debian's layout for postgresql-15
VECTOR_CONTROL = Path("/usr/share/postgresql/15/extension/vector.control")
JAVA_HINT = "java 17 not found: apt-get install openjdk-17-jdk-headless"


def _java_candidates() -> list[Path]:
    home = os.environ.get("JAVA_HOME")
    found = [Path(home) / "bin" / "java"] if home else []
    which = shutil.which("java")
    return found + ([Path(which)] if which else [])


def _major(java: Path) -> int:
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30).stderr
    except OSError:
        return 0
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        return 0
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major   # "1.8.0_x" means Java 8


@lru_cache(maxsize=1)
def java() -> Path:
    """A java >= 17 (JAVA_HOME first, then PATH); both brokers run on it."""
    for cand in _java_candidates():
        if cand.exists() and _major(cand) >= 17:
            return cand
    raise PrerequisiteMissing(JAVA_HINT)


def javac() -> Path:
    """javac next to that java: the Neo4j launcher is compiled once (a JRE lacks javac)."""
    cand = java().resolve().parent / "javac"
    if cand.exists():
        return cand
    raise PrerequisiteMissing("javac 17 not found: apt-get install openjdk-17-jdk-headless")


def has_jars(lib: Path) -> bool:
    return lib.is_dir() and any(lib.glob("*.jar"))


def fetch_jars(component: str, lib: Path) -> str:
    """mvn copy-dependencies for memstream/stack/files/<component>/pom.xml, only when <lib> is missing or empty."""
    if has_jars(lib):
        return f"present ({len(list(lib.glob('*.jar')))} jars)"
    mvn = shutil.which("mvn")
    if mvn is None:
        raise PrerequisiteMissing("mvn not found: apt-get install maven")
    lib.mkdir(parents=True, exist_ok=True)
    cmd = [mvn, "-q", "-B", "-f", str(STACK_SRC / component / "pom.xml"), "dependency:copy-dependencies",
           "-DincludeScope=runtime", f"-DoutputDirectory={lib}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not has_jars(lib):
        last = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
        raise StackError(f"mvn could not fetch the {component} jars: {last[0]}")
    return f"fetched ({len(list(lib.glob('*.jar')))} jars)"


def postgres_installed() -> bool:
    return (PG_BIN / "postgres").exists() and VECTOR_CONTROL.exists()


def install_postgres() -> str:
    """PostgreSQL 15 + pgvector via memstream/stack/files/postgres/install-pgvector.sh (apt-get; needs root)."""
    if postgres_installed():
        return "present (postgresql-15, pgvector)"
    proc = subprocess.run(["bash", str(STACK_SRC / "postgres" / "install-pgvector.sh")],
                          capture_output=True, text=True)
    if proc.returncode != 0 or not postgres_installed():
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise PrerequisiteMissing(f"postgresql-15 + pgvector not installed: {last[0]}")
    return "installed (postgresql-15, pgvector)"


def require_installed(kafka_lib: Path, neo4j_lib: Path) -> None:
    """`up` refuses early, in one line, rather than failing half-way through start-up."""
    java()
    missing = [name for name, ok in (("kafka jars", has_jars(kafka_lib)), ("neo4j jars", has_jars(neo4j_lib)),
                                     ("postgresql-15 + pgvector", postgres_installed())) if not ok]
    if missing:
        raise PrerequisiteMissing(f"{', '.join(missing)} missing: run `memstream stack install` first")
