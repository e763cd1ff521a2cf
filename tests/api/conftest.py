from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from app.repository.database import ConnectionPool
from deploy.localstack import free_port
from tests.helpers.timelines import default_storage_id

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = "application/problem+json"


def assert_problem(response: requests.Response, status: int) -> dict:
    """The response is a Problem of that status that tells the caller something."""
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"] == PROBLEM
    body = response.json()
    assert body["status"] == status
    assert body["type"] == f"http://httpstatus.es/{status}"
    assert body["title"] and body["detail"]
    assert "Traceback" not in response.text
    return body


def start_gunicorn(env: dict[str, str], port: int, log: Path | None = None,
                   graceful_timeout_s: int = 5) -> subprocess.Popen:
    """gunicorn on the port. Its output goes to ``log`` when given, else to pipes
    for ``communicate()``; a long-lived server must get a log file, as nothing
    reads the pipes and a full pipe stops the server."""
    output = open(log, "ab") if log is not None else subprocess.PIPE  # noqa: SIM115
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py"),
             "app.wsgi:app"],
            env=dict(env, NAKADI_BIND=f"127.0.0.1:{port}", NAKADI_WORKERS="2",
                     NAKADI_GRACEFUL_TIMEOUT=str(graceful_timeout_s),
                     NAKADI_MAX_STREAMS_PER_PARTITION="3"),
            cwd=ROOT, stdout=output, stderr=output, text=True,
        )
    finally:
        if log is not None:
            output.close()


def stop_gunicorn(process: subprocess.Popen) -> tuple[str, str]:
    process.terminate()
    try:
        return process.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.communicate()


def wait_until_serving(process: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            pytest.fail(f"gunicorn exited with {process.returncode}: {log.read_text()[-3000:]}")
        try:
            requests.get(url + "/health", timeout=5)
            return
        except requests.ConnectionError:
            if time.monotonic() > deadline:
                stop_gunicorn(process)
                pytest.fail("gunicorn did not answer in 30 s")
            time.sleep(0.1)


def worker_pids(master: int) -> list[int]:
    """The gunicorn workers of a master process."""
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return [int(pid) for pid in children]


@dataclass
class Server:
    """A gunicorn of the session: its URL, master process and log."""

    url: str
    process: subprocess.Popen
    log: Path


def serve(env: dict[str, str], log: Path) -> Iterator[Server]:
    """A long-lived gunicorn for the environment, until the generator is closed."""
    port = free_port()
    process = start_gunicorn(env, port, log)
    url = f"http://127.0.0.1:{port}"
    wait_until_serving(process, url, log)
    yield Server(url, process, log)
    stop_gunicorn(process)


@pytest.fixture(scope="session")
def server(stack_env: dict[str, str], tmp_path_factory) -> Iterator[Server]:
    """A real gunicorn (gevent workers) serving the session's stack, whose default
    storage is ``postgres``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAKADI_")}
    yield from serve(env | stack_env, tmp_path_factory.mktemp("gunicorn") / "gunicorn.log")


@pytest.fixture(scope="session")
def kafka_default_server(kafka_default_env: dict[str, str], kafka_default_pool,
                         tmp_path_factory) -> Iterator[Server]:
    """A second gunicorn on the same services, serving the database whose default
    storage is ``kafka``. Started by the first test that runs on kafka."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAKADI_")}
    yield from serve(env | kafka_default_env,
                     tmp_path_factory.mktemp("gunicorn-kafka") / "gunicorn.log")


@pytest.fixture(params=["postgres", "kafka"])
def default_storage(request) -> str:
    """Runs the test on each engine in turn, as the default storage (where new event
    types go). The test's ``base_url``, ``pool`` and ``server_env`` are those of a
    stack whose default storage is that engine; no test changes a default."""
    served = request.getfixturevalue("kafka_default_server" if request.param == "kafka"
                                     else "server")
    assert default_storage_id(served.url) == request.param
    return request.param


def _on_kafka(request: pytest.FixtureRequest) -> bool:
    """Whether the test runs with ``default_storage`` set to kafka."""
    return ("default_storage" in request.fixturenames
            and request.getfixturevalue("default_storage") == "kafka")


@pytest.fixture
def base_url(request: pytest.FixtureRequest, server: Server) -> str:
    """The URL of the gunicorn serving the test's stack (see ``default_storage``)."""
    if _on_kafka(request):
        return request.getfixturevalue("kafka_default_server").url
    return server.url


@pytest.fixture
def pool(request: pytest.FixtureRequest, pool: ConnectionPool) -> ConnectionPool:
    """A pool on the metadata database of the test's stack (see ``default_storage``)."""
    return request.getfixturevalue("kafka_default_pool") if _on_kafka(request) else pool


@pytest.fixture
def server_env(request: pytest.FixtureRequest, server_env: dict[str, str]) -> dict[str, str]:
    """The environment for a gunicorn of its own on the test's stack."""
    if _on_kafka(request):
        return server_env | request.getfixturevalue("kafka_default_env")
    return server_env
