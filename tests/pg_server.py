"""A throwaway PostgreSQL server for tests and benches: initdb + pg_ctl in a temp dir on a free loopback port.

The postmaster dies with the process that started it, however that process ends (tests/spawned.py's watchdog).
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from spawned import guard_pid, release_pid

ROOT = Path(__file__).resolve().parents[1]
# Debian's server binaries (the newest installed major version), or RA_TEST_PG_BIN
_DEBIAN = sorted(
    (p.parent for p in Path("/usr/lib/postgresql").glob("*/bin/postgres")), key=lambda b: b.parts[-2].zfill(4)
)
PG_BIN = Path(os.environ.get("RA_TEST_PG_BIN") or (_DEBIAN[-1] if _DEBIAN else "/usr/lib/postgresql/15/bin"))
# scripts/setup.sh writes this when it could not install the server (no apt, not root, no sudo): the reason
NO_POSTGRES = ROOT / ".venv" / ".ra-no-postgres"
SUPERUSER = "postgres"
# a test server trades durability for speed; the bench passes durable=True and keeps PostgreSQL's defaults
FAST = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def runuser() -> str | None:
    """util-linux's runuser (in /usr/sbin, which a minimal PATH such as `env -i`'s or cron's lacks)."""
    return shutil.which("runuser") or shutil.which("runuser", path="/usr/sbin:/sbin")


def missing_binaries() -> str | None:
    """Why no server can start here (None when initdb, pg_ctl and postgres are all present)."""
    absent = [name for name in ("initdb", "pg_ctl", "postgres") if not (PG_BIN / name).is_file()]
    if absent:
        recorded = NO_POSTGRES.read_text(encoding="utf-8").strip() if NO_POSTGRES.exists() else ""
        hint = recorded or "bash scripts/setup.sh installs Debian's postgresql; or set RA_TEST_PG_BIN"
        return f"PostgreSQL server binaries not found in {PG_BIN} ({', '.join(absent)}): {hint}"
    if os.geteuid() == 0 and runuser() is None:
        return "running as root, and runuser (util-linux) is not found to start PostgreSQL as its own user"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """One cluster in a temp dir; as root the server runs as the `postgres` system user (initdb refuses root)."""

    def __init__(self, *, durable: bool = False):
        self.root = Path(tempfile.mkdtemp(prefix="ra-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.settings = {} if durable else dict(FAST)
        self._names = itertools.count(1)
        self._as_postgres = os.geteuid() == 0
        self.postmaster: int | None = None

    def _run(self, *args: str) -> None:
        cmd = [str(PG_BIN / args[0]), *args[1:]]
        if self._as_postgres:
            cmd = [runuser() or "runuser", "-u", SUPERUSER, "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}: {(done.stderr or done.stdout).strip()}")

    def start(self) -> PgServer:
        if self._as_postgres:
            shutil.chown(self.root, user=SUPERUSER)
        self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-sync")
        options = [f"-p {self.port}", "-c listen_addresses=127.0.0.1", f"-k {self.root}"]
        options += [f"-c {key}={value}" for key, value in self.settings.items()]
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-o", " ".join(options), "-w",
                  "start")  # fmt: skip
        self.postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        guard_pid(self.postmaster, self.root)
        return self

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
            if self.postmaster is not None:  # stopped: the watchdog forgets it (else it stops it at exit)
                release_pid(self.postmaster, self.root)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PgServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{dbname}"

    def new_database(self, prefix: str = "ra") -> str:
        """A fresh, empty database; returns its URL."""
        import psycopg

        name = f"{prefix}_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)
