"""Neo4j 5.26 community, embedded behind memstream/stack/files/neo4j/Launcher.java, with Bolt on loopback.

Auth is enabled: the launcher gets the application's user and password (adapters/neo4j_auth.py)
in its environment, never on its command line, and sets that password at every start.
"""
from __future__ import annotations

import hashlib
import logging
import os
import secrets
import subprocess
from pathlib import Path
from typing import Any

from adapters import neo4j_auth
from kernel.errors import StackError
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

    @property
    def ready_file(self) -> Path:
        return self.home / "launcher.ready"

    def markers(self) -> list[str]:
        return ["Launcher", str(self.home)]

    def launcher_ready(self) -> bool:
        """The launcher writes its pid to launcher.ready once the password is set: logging in
        before that would only fail, and each failure counts towards the user's lockout (three
        in a row lock it for 5 s: Neo4j's dbms.security.auth_max_failed_attempts)."""
        try:
            pid = int(self.ready_file.read_text().strip())
        except (OSError, ValueError):
            return False
        return process.alive(pid, self.markers())

    def compile_launcher(self) -> str:
        """javac once into <stack_dir>/neo4j/classes: running Launcher.java as a source file would
        recompile it (~2 s) on every start. Recompile only when the source changed: its digest is
        kept beside the class (an mtime test misses a class compiled later from an older source,
        e.g. by another checkout sharing the stack)."""
        target = self.classes / "Launcher.class"
        stamp = self.classes / "Launcher.java.sha256"
        digest = hashlib.sha256(LAUNCHER_SRC.read_bytes()).hexdigest()
        if target.exists() and stamp.exists() and stamp.read_text().strip() == digest:
            return "compiled"
        self.classes.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([str(prereqs.javac()), "-nowarn", "-d", str(self.classes), "-cp", f"{self.lib}/*",
                               str(LAUNCHER_SRC)], capture_output=True, text=True)
        if proc.returncode != 0:
            first = (proc.stderr or proc.stdout).strip().splitlines()[:1] or ["no output"]
            raise StackError(f"javac failed on {LAUNCHER_SRC}: {first[0]}")
        stamp.write_text(digest + "\n")
        return "compiled now"

    def prepare(self) -> None:
        self.compile_launcher()
        (self.layout.data / "neo4j").mkdir(parents=True, exist_ok=True)
        neo4j_auth.ensure_password(self.settings)     # `up` made it already; a no-op then

    def popen_kwargs(self) -> dict[str, Any]:
        # The password travels in the environment (readable only by this user, unlike argv).
        user, pw = neo4j_auth.auth(self.settings)
        return {"env": {**os.environ, "MEMSTREAM_NEO4J_USER": user, "MEMSTREAM_NEO4J_PASSWORD": pw}}

    def argv(self) -> list[str]:
        s = self.settings
        return [str(prereqs.java()), f"-Xmx{s.neo4j_heap}", f"-Xms{s.neo4j_heap}", *JVM_FLAGS,
                "-cp", f"{self.classes}:{self.lib}/*", "Launcher",
                str(self.home), str(s.neo4j_bolt_port), s.neo4j_pagecache, s.neo4j_host,
                str(self.layout.data / "neo4j"), str(self.layout.logs / "neo4j")]   # debug.log etc. there

    def probe(self) -> bool:
        if not (process.port_open(self.settings.neo4j_host, self.settings.neo4j_bolt_port) and self.launcher_ready()):
            return False
        log = logging.getLogger("neo4j")
        level = log.level
        log.setLevel(logging.CRITICAL)        # failed attempts while it starts are expected
        try:
            with neo4j_auth.driver(self.settings, connection_timeout=2) as driver:
                driver.verify_connectivity()
                # Bolt can answer before the default database is online: run a real query.
                driver.execute_query("RETURN 1")
            return True
        except Exception:
            return False
        finally:
            log.setLevel(level)

    def outdated(self) -> bool:
        """Running, but not with our credentials: started by older code with auth disabled (it
        lets in a made-up user), or with another password than the one configured now (ours is
        refused). A restart runs the current launcher, which sets it. Data is kept."""
        if not process.port_open(self.settings.neo4j_host, self.settings.neo4j_bolt_port):
            return False
        from neo4j import GraphDatabase
        from neo4j.exceptions import AuthError
        log = logging.getLogger("neo4j")
        level = log.level
        log.setLevel(logging.CRITICAL)
        try:
            # A user that does not exist: its failures count towards no user's lockout.
            made_up = ("memstream-auth-check", secrets.token_urlsafe(16))
            try:
                with GraphDatabase.driver(self.address, auth=made_up, connection_timeout=2) as driver:
                    driver.verify_connectivity()
                return True
            except AuthError:
                pass
            if not self.launcher_ready():
                return False      # ours, still setting the password: the probe waits for it
            try:
                with neo4j_auth.driver(self.settings, connection_timeout=2) as driver:
                    driver.verify_connectivity()
                return False
            except AuthError:
                return True
        except Exception:
            return False          # not answering (yet): not ours to judge here
        finally:
            log.setLevel(level)
