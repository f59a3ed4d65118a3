"""Neo4j 5.26 community, embedded behind memstream/stack/files/neo4j/Launcher.java, with Bolt on loopback."""
from __future__ import annotations

import logging
import subprocess
from pathlib import Path

from memstream.errors import StackError
from memstream.stack import prereqs, process
from memstream.stack.base import Service

LAUNCHER_SRC = prereqs.STACK_SRC / "neo4j" / "Launcher.java"
# What Neo4j's own server scripts pass on Java 17 (reflective access for its page cache and
# Netty); without them it still starts, but logs warnings and falls back to slower paths.
JVM_FLAGS = ["-XX:+UseG1GC", "-XX:-OmitStackTraceInFastThrow", "-Djdk.nio.maxCachedBufferSize=1024",
             "-Dio.netty.tryReflectionSetAccessible=true", "-Dlog4j2.disable.jmx=true",
             "--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/java.io=ALL-UNNAMED",
             "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED", "--add-opens=java.base/java.lang=ALL-UNNAMED"]


class Neo4j(Service):
    name = "neo4j"

    @property
    def lib(self) -> Path:
        return self.layout.lib / "neo4j"

    @property
    def home(self) -> Path:
        return self.layout.root / "neo4j"

    @property
    def classes(self) -> Path:
        return self.home / "classes"

    @property
    def address(self) -> str:
        return self.settings.neo4j_uri

    def ports(self) -> list[tuple[str, int]]:
        return [(self.settings.neo4j_host, self.settings.neo4j_bolt_port)]

    def markers(self) -> list[str]:
        return ["Launcher", str(self.home)]

    def compile_launcher(self) -> str:
        """javac once into <stack_dir>/neo4j/classes: running Launcher.java as a source file would
        recompile it (~2 s) on every start. Recompile only when the source is newer."""
        target = self.classes / "Launcher.class"
        if target.exists() and target.stat().st_mtime >= LAUNCHER_SRC.stat().st_mtime:
            return "compiled"
        self.classes.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([str(prereqs.javac()), "-nowarn", "-d", str(self.classes), "-cp", f"{self.lib}/*",
                               str(LAUNCHER_SRC)], capture_output=True, text=True)
        if proc.returncode != 0:
            first = (proc.stderr or proc.stdout).strip().splitlines()[:1] or ["no output"]
            raise StackError(f"javac failed on {LAUNCHER_SRC}: {first[0]}")
        return "compiled now"

    def prepare(self) -> None:
        self.compile_launcher()
        (self.layout.data / "neo4j").mkdir(parents=True, exist_ok=True)

    def argv(self) -> list[str]:
        s = self.settings
        return [str(prereqs.java()), f"-Xmx{s.neo4j_heap}", f"-Xms{s.neo4j_heap}", *JVM_FLAGS,
                "-cp", f"{self.classes}:{self.lib}/*", "Launcher",
                str(self.home), str(s.neo4j_bolt_port), s.neo4j_pagecache, s.neo4j_host,
                str(self.layout.data / "neo4j"), str(self.layout.logs / "neo4j")]   # debug.log etc. there

    def probe(self) -> bool:
        if not process.port_open(self.settings.neo4j_host, self.settings.neo4j_bolt_port):
            return False
        from neo4j import GraphDatabase       # lazy import
        log = logging.getLogger("neo4j")
        level = log.level
        log.setLevel(logging.CRITICAL)        # failed attempts while it starts are expected
        try:
            with GraphDatabase.driver(self.address, auth=None, connection_timeout=2) as driver:
                driver.verify_connectivity()
                # Bolt can answer before the default database is online: run a real query.
                driver.execute_query("RETURN 1")
            return True
        except Exception:
            return False
        finally:
            log.setLevel(level)
