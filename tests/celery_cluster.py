"""A throwaway Celery deployment for tests and benches: Debian's redis-server on a free loopback port as the broker,
and dagster-celery workers (`dagster-celery worker start`, as a team runs them), each in its own process group.

Whoever starts one stops it (SIGTERM to the group, SIGKILL after a grace period), also on failure; and each group
dies with the process that started it, however that process ends (tests/spawned.py's watchdog).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from spawned import guard_group, release_group

ROOT = Path(__file__).resolve().parents[1]
REDIS_SERVER = os.environ.get("RA_TEST_REDIS_SERVER") or shutil.which("redis-server") or "/usr/bin/redis-server"
# scripts/setup.sh writes this when it could not install redis-server (no apt, not root, no sudo): the reason
NO_REDIS = ROOT / ".venv" / ".ra-no-redis"
BIN = Path(sys.executable).parent  # the venv's scripts: dagster-celery, celery


def missing() -> str | None:
    """Why no broker or worker can start here (None when redis-server and dagster-celery are both present)."""
    if not os.access(REDIS_SERVER, os.X_OK):
        recorded = NO_REDIS.read_text(encoding="utf-8").strip() if NO_REDIS.exists() else ""
        return f"redis-server not found ({recorded or 'bash scripts/setup.sh installs Debian redis-server'})"
    try:
        import dagster_celery  # noqa: F401
    except ImportError:
        return "dagster-celery is not installed (pip install -e '.[celery]'; scripts/setup.sh does)"
    if not (BIN / "dagster-celery").exists():
        return f"{BIN / 'dagster-celery'} not found (pip install -e '.[celery]')"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_group(cmd: list[str], folder: Path | None = None, **popen) -> subprocess.Popen:
    """`cmd` as the leader of its own process group, which dies with this process (tests/spawned.py); so does
    `folder` (its temp dir)."""
    process = subprocess.Popen(cmd, start_new_session=True, **popen)
    guard_group(process, folder)
    return process


def stop_group(process: subprocess.Popen, grace: float, folder: Path | None = None) -> None:
    """SIGTERM to the process group, SIGKILL after `grace` seconds (a no-op for a group already gone)."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):  # the group's other members (a worker's pool) go too
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=30)
    release_group(process, folder)


class RedisServer:
    """redis-server in a temp dir on a free loopback port, no persistence (`--save ''`, no AOF)."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="ra-redis-"))
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 30) -> RedisServer:
        log = (self.root / "redis.log").open("w")
        cmd = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.root), "--save", "",
               "--appendonly", "no", "--daemonize", "no", "--databases", "64"]  # fmt: skip
        self.process = start_group(cmd, self.root, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not self.ping():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not answer on port {self.port}: {self.log_tail()}")
            time.sleep(0.1)
        return self

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def log_tail(self) -> str:
        path = self.root / "redis.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def stop(self) -> None:
        try:
            if self.process is not None:
                stop_group(self.process, grace=10, folder=self.root)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class CeleryWorker:
    """One `dagster-celery worker start -A dagster_celery.app -y <yaml> -n <name>` (one step at a time), its own
    process group; `hostname` is what the step's engine event records as its "Celery worker"."""

    def __init__(self, name: str, env: dict[str, str], config_yaml: Path, log: Path, concurrency: int = 1):
        self.name, self.env, self.config_yaml, self.log, self.concurrency = name, env, config_yaml, log, concurrency
        self.hostname = f"{name}@{socket.gethostname()}"
        self.process: subprocess.Popen | None = None

    def start(self) -> CeleryWorker:
        cmd = [str(BIN / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app", "-y", str(self.config_yaml),
               "-n", self.name, "-i", "ra_assets.celery_location", "-l", "INFO", "--",
               f"--concurrency={self.concurrency}", "--without-gossip", "--without-mingle"]  # fmt: skip
        env = {**self.env, "PATH": os.pathsep.join([str(BIN), self.env.get("PATH", os.defpath)])}
        with self.log.open("w") as out:
            self.process = start_group(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        return self

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while f"{self.hostname} ready." not in self.log_text():
            if self.process is None or self.process.poll() is not None:
                raise RuntimeError(f"worker {self.name} exited before it was ready:\n{self.log_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker {self.name} not ready after {timeout:.0f}s:\n{self.log_text()[-3000:]}")
            time.sleep(0.2)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL to the whole worker (main process and pool): a node lost mid-step."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
            release_group(self.process)

    def stop(self, grace: float = 20) -> None:
        if self.process is not None:
            stop_group(self.process, grace)


def write_executor_yaml(path: Path, **transport) -> Path:
    """scripts/dagster-celery.yaml with broker transport options overridden (e.g. a short visibility_timeout)."""
    import yaml

    config = yaml.safe_load((ROOT / "scripts" / "dagster-celery.yaml").read_text(encoding="utf-8"))
    config["execution"]["config"]["config_source"]["broker_transport_options"].update(transport)
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path
