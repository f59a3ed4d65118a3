"""PostgreSQL 15 + pgvector: a cluster of our own under <stack_dir> (never the system one),
on its own port, TCP on loopback only, password (scram) auth over TCP."""
from __future__ import annotations

import getpass
import os
import pwd
import signal
import subprocess
from pathlib import Path
from typing import Any

from kernel.errors import PrerequisiteMissing, StackError
from memstream.stack import process
from memstream.stack.base import Service
from memstream.stack.prereqs import PG_BIN


def _psql_literal(value: str) -> str:
    """Quote a value for psql's `\\set` (single quotes; '' and \\\\ escaped)."""
    if "\n" in value or "\r" in value:
        raise StackError("Postgres role, database names and password must be single-line")
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


class Postgres(Service):
    name = "postgres"
    # SIGTERM is Postgres' "smart" shutdown: it waits for every client to disconnect, which a
    # forgotten consumer may never do. SIGINT is "fast": rolls back open transactions, then a
    # clean checkpoint and exit (no recovery needed at the next start).
    stop_signal = signal.SIGINT

    @property
    def data_dir(self) -> Path:
        return self.layout.data / "postgres"

    @property
    def socket_dir(self) -> Path:
        return self.layout.run / "postgres"

    @property
    def address(self) -> str:
        return f"{self.settings.pg_host}:{self.settings.pg_port}"

    def ports(self) -> list[tuple[str, int]]:
        return [(self.settings.pg_host, self.settings.pg_port)]

    def markers(self) -> list[str]:
        return [str(PG_BIN / "postgres"), str(self.data_dir)]

    # -- who runs it ---------------------------------------------------------------------------
    # Postgres refuses to run as root. As root we run it as the `postgres` OS user (created by the
    # postgresql-15 package); as anyone else, as that user. Its superuser role has the same name,
    # reached over the unix socket with peer auth: no password for it exists anywhere.
    @property
    def os_user(self) -> str:
        return "postgres" if os.geteuid() == 0 else getpass.getuser()

    def _as_pg(self) -> list[str]:
        return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _pg_ids(self) -> tuple[int, int]:
        try:
            pw = pwd.getpwnam(self.os_user)
        except KeyError:
            raise PrerequisiteMissing("OS user `postgres` not found: apt-get install postgresql-15") from None
        return pw.pw_uid, pw.pw_gid

    def _make_owned_dir(self, path: Path, mode: int) -> None:
        path.mkdir(parents=True, exist_ok=True)
        uid, gid = self._pg_ids()
        if os.geteuid() == 0:
            os.chown(path, uid, gid)
        path.chmod(mode)

    def _ensure_traversable(self, path: Path) -> None:
        """The postgres OS user must be able to walk down to its data and socket dirs. Inside
        <stack_dir> we add o+x ourselves; above it we only say what to change."""
        if os.geteuid() != 0:
            return
        uid, gid = self._pg_ids()
        for parent in reversed(path.parents):
            st = parent.stat()
            ok = (st.st_mode & 0o001 or (st.st_uid == uid and st.st_mode & 0o100)
                  or (st.st_gid == gid and st.st_mode & 0o010))
            if ok:
                continue
            if parent == self.layout.root or self.layout.root in parent.parents:
                parent.chmod(st.st_mode | 0o001)
            else:
                raise StackError(f"the postgres OS user cannot enter {parent}: `chmod o+x {parent}` "
                                 f"or set MEMSTREAM_STACK_DIR to a path it can reach")

    # -- lifecycle -----------------------------------------------------------------------------
    def discover_pid(self) -> int | None:
        # The postmaster records itself in postmaster.pid: adopt a cluster whose pid file we lost.
        return process.read_pid(self.data_dir / "postmaster.pid")

    def prepare(self) -> None:
        # 1. Dirs, owned by the OS user that runs the server (socket dir too: it creates its socket there).
        self.layout.data.mkdir(parents=True, exist_ok=True)
        self._make_owned_dir(self.socket_dir, 0o755)
        self._ensure_traversable(self.data_dir)
        self._ensure_traversable(self.socket_dir)
        # 2. initdb once (PG_VERSION marks an initialised cluster). Host auth scram, local peer.
        if not (self.data_dir / "PG_VERSION").exists():
            self._make_owned_dir(self.data_dir, 0o700)
            process.run_logged(
                [*self._as_pg(), str(PG_BIN / "initdb"), "-D", str(self.data_dir), "-U", self.os_user,
                 "--auth-local=peer", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8",
                 "--no-instructions"],
                self.log_file, "postgres initdb", cwd=self.data_dir)
        self._align_conf_file()

    def _align_conf_file(self) -> None:
        """Write the shared_buffers we start with (`-c`, argv) into postgresql.conf too: the
        provisioning's pg_reload_conf() re-reads the file, found initdb's 128MB there beside the
        running 1GB, and logged "configuration file contains errors" on every start."""
        conf = self.data_dir / "postgresql.conf"
        try:
            text = conf.read_text()
        except OSError:
            return
        wanted = f"shared_buffers = {self.settings.pg_shared_buffers}\t\t# set by memstream (MEMSTREAM_PG_SHARED_BUFFERS)"
        lines = [wanted if ln.lstrip().startswith("shared_buffers") else ln for ln in text.splitlines()]
        if wanted not in lines:
            lines.append(wanted)
        new = "\n".join(lines) + "\n"
        if new != text:
            conf.write_text(new)   # in place: the file keeps its owner (the postgres OS user)

    def argv(self) -> list[str]:
        s = self.settings
        return [str(PG_BIN / "postgres"), "-D", str(self.data_dir), "-p", str(s.pg_port),
                "-k", str(self.socket_dir),
                "-c", f"listen_addresses={s.pg_host}",       # loopback only, never 0.0.0.0
                "-c", f"shared_buffers={s.pg_shared_buffers}",  # HNSW scans stay in Postgres' own cache
                "-c", "logging_collector=off"]                # stderr -> our log file

    def popen_kwargs(self) -> dict[str, Any]:
        # setuid in the child (not `runuser`): the pid we record is then the postmaster itself.
        kw: dict[str, Any] = {"cwd": self.data_dir}
        if os.geteuid() == 0:
            uid, gid = self._pg_ids()
            kw.update(user=uid, group=gid, extra_groups=[])
        return kw

    def probe(self) -> bool:
        s = self.settings
        return subprocess.run([str(PG_BIN / "pg_isready"), "-q", "-h", s.pg_host, "-p", str(s.pg_port), "-t", "2"],
                              stdin=subprocess.DEVNULL).returncode == 0

    def after_healthy(self) -> None:
        from adapters.privacy import pgroles
        s = self.settings
        # 1. Roles (one per component, none a superuser), databases, grants, pgvector: as the OS
        #    superuser over the socket, idempotent (every `up`, so a changed password takes effect
        #    and an older stack's superuser `memstream` is demoted in place). The script is
        #    memstream/stack/files/postgres/roles.sql, shared with docker-compose.yml. Passwords
        #    (generated into <stack_dir>/secrets on the first `up`) go in via stdin, never argv.
        pgroles.ensure_passwords(s)
        variables = pgroles.psql_variables(s)
        secrets = [v for k, v in variables.items() if k.endswith("_pw")]
        script = "\n".join([*(rf"\set {k} {_psql_literal(v)}" for k, v in variables.items()),
                            (Path(__file__).parent / "files" / "postgres" / "roles.sql").read_text(), ""])
        proc = subprocess.run([*self._as_pg(), str(PG_BIN / "psql"), "-X", "-q", "-h", str(self.socket_dir),
                               "-p", str(s.pg_port), "-U", self.os_user, "-d", "postgres", "-f", "-"],
                              input=script, capture_output=True, text=True, cwd=self.data_dir)
        if proc.returncode != 0:
            msg = (proc.stderr or proc.stdout).strip().splitlines()[:1] or ["no output"]
            for secret in secrets:
                msg[0] = msg[0].replace(secret, "***")
            raise StackError(f"postgres provisioning failed: {msg[0]}")
        # 2. Check the path clients take: TCP + password, each role into the databases it uses.
        import psycopg                                      # lazy import
        logins = [("owner", s.pg_database), ("owner", s.pg_keys_database), ("projector", s.pg_database),
                  ("api", s.pg_database), ("api", s.pg_keys_database), ("keystore", s.pg_keys_database)]
        for role, db in logins:
            try:
                with psycopg.connect(s.pg_dsn(db, role=role), connect_timeout=5) as conn:
                    conn.execute("SELECT 1")
            except psycopg.Error as e:
                raise StackError(f"postgres is up but {pgroles.role_name(s, role)}@{db} cannot log in over TCP: "
                                 f"{str(e).strip().splitlines()[0]}; see {self.log_file}") from None
