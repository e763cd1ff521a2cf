"""The fault suite's own services and broker: killing them leaves the session's
stack alone. One private stack for the package; every test brings back what it
killed before it ends."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg2
import pytest

from deploy.localstack import LocalStack, free_port
from sql.migrate import migrate
from tests.api.conftest import start_gunicorn, stop_gunicorn, wait_until_serving

DATABASE_TIMEOUT_S = "2"
ZOOKEEPER_TIMEOUT_S = "4"
KAFKA_TIMEOUT_S = "5"
TOPIC_SWEEP_INTERVAL_S = "1"


@dataclass
class FaultStack:
    """The private services, and the gunicorn serving them."""

    stack: LocalStack
    env: dict[str, str]
    url: str
    gunicorn: subprocess.Popen

    def rows(self, query: str) -> list[tuple]:
        conn = psycopg2.connect(self.env["NAKADI_DATABASE_URL"])
        try:
            with conn, conn.cursor() as cursor:
                cursor.execute(query)
                return cursor.fetchall()
        finally:
            conn.close()

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal every process of the service (its whole session: a kill -9 of
        PostgreSQL takes its backends too)."""
        service = next(s for s in self.stack.services if s.name == name)
        os.killpg(service.process.pid, sig)
        service.process.wait(10)
        self.stack.services.remove(service)

    def restart(self, name: str) -> None:
        self.stack.restart(name)

    @contextmanager
    def frozen(self, name: str) -> Iterator[None]:
        """Stop every process of the service (SIGSTOP) while the block runs, as a host
        that hangs: connections stay open, the kernel acknowledges what is sent, and
        nothing answers. PostgreSQL's backends run in sessions of their own, so the
        service's children are stopped one by one, not as a process group."""
        service = next(s for s in self.stack.services if s.name == name)
        root = service.process.pid
        children = Path(f"/proc/{root}/task/{root}/children").read_text().split()
        pids = [root, *map(int, children)]
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)


@pytest.fixture(scope="package")
def faults(tmp_path_factory) -> Iterator[FaultStack]:
    data_dir = Path(tempfile.mkdtemp(prefix="nakadi-faults-"))
    data_dir.chmod(0o755)  # PostgreSQL runs as its own user when we are root
    stack = LocalStack(data_dir, free_port(), free_port(), free_port())
    env = stack.start({})
    conn = psycopg2.connect(env["NAKADI_DATABASE_URL"])
    migrate(conn)
    conn.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAKADI_")} | env | {
        "NAKADI_ZOOKEEPER_ROOT": "/nakadi-faults",
        "NAKADI_DATABASE_TIMEOUT_S": DATABASE_TIMEOUT_S,
        "NAKADI_ZOOKEEPER_TIMEOUT_S": ZOOKEEPER_TIMEOUT_S,
        "NAKADI_KAFKA_TIMEOUT_S": KAFKA_TIMEOUT_S,
        "NAKADI_TOPIC_SWEEP_INTERVAL_S": TOPIC_SWEEP_INTERVAL_S,
    }
    port = free_port()
    log = tmp_path_factory.mktemp("faults") / "gunicorn.log"
    process = start_gunicorn(env, port, log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(process, url, log)
        yield FaultStack(stack, env, url, process)
    finally:
        stop_gunicorn(process)
        stack.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
