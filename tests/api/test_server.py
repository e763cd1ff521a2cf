"""The server as clients and operators meet it: health, errors, flow ids, start-up."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import requests

from deploy.localstack import free_port
from tests.api.conftest import (
    ROOT,
    assert_problem,
    start_gunicorn,
    stop_gunicorn,
    wait_until_serving,
)
from tests.helpers.broker import business_event, new_event_type
from tests.helpers.raw_http import RawConnection
from tests.helpers.waiting import wait_until


@pytest.fixture
def event_type(base_url):
    name = new_event_type(base_url)
    yield name
    requests.delete(f"{base_url}/event-types/{name}")


def test_health_lists_every_dependency(base_url):
    response = requests.get(base_url + "/health")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "status": "OK",
        "dependencies": {"postgresql": "up", "zookeeper": "up",
                         "storage:kafka": "up", "storage:postgres": "up"},
    }


def test_unknown_path_is_a_404_problem(base_url):
    body = assert_problem(requests.get(base_url + "/no/such/thing"), 404)
    assert "not found" in body["detail"].lower()


def test_a_trailing_slash_reaches_the_same_endpoint(base_url, event_type):
    listing = requests.get(base_url + "/event-types/")
    assert listing.status_code == 200
    assert event_type in [item["name"] for item in listing.json()]
    assert requests.get(f"{base_url}/event-types/{event_type}/").json()["name"] == event_type
    published = requests.post(f"{base_url}/event-types/{event_type}/events/",
                              json=[business_event(1)])
    assert published.status_code == 200, published.text
    assert_problem(requests.get(base_url + "/no/such/thing/"), 404)


def test_wrong_method_is_a_405_problem_with_allow(base_url):
    response = requests.delete(base_url + "/health")
    assert_problem(response, 405)
    assert "GET" in response.headers["Allow"]


def test_flow_id_is_echoed_or_generated(base_url):
    given = requests.get(base_url + "/health", headers={"X-Flow-Id": "my-flow-123"})
    assert given.headers["X-Flow-Id"] == "my-flow-123"
    first = requests.get(base_url + "/health").headers["X-Flow-Id"]
    second = requests.get(base_url + "/no/such/thing").headers["X-Flow-Id"]
    assert len(first) >= 16 and len(second) >= 16 and first != second
    long = "f" * 200 + "g" * 100
    cut = requests.get(base_url + "/health", headers={"X-Flow-Id": long}).headers["X-Flow-Id"]
    assert cut == long[:255]


def wait_for_exit(process: subprocess.Popen, seconds: float) -> tuple[int, str]:
    try:
        _, err = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        stop_gunicorn(process)
        raise AssertionError(f"gunicorn still running after {seconds}s") from None
    return process.returncode, err


def start_failures(err: str) -> list[str]:
    """The messages of the log lines saying why the broker cannot start; like every other
    line of the log, each is a JSON object (until 2026-11-29 they were plain text)."""
    lines = [json.loads(line) for line in err.splitlines() if "cannot start" in line]
    assert all(line["level"] == "ERROR" for line in lines), lines
    return [line["message"] for line in lines]


def test_start_fails_fast_naming_an_unreachable_database(server_env):
    dead = free_port()
    env = dict(server_env, NAKADI_DATABASE_URL=f"postgresql://nakadi@127.0.0.1:{dead}/nakadi")
    started = time.monotonic()
    code, err = wait_for_exit(start_gunicorn(env, free_port()), 20)
    assert code != 0
    assert time.monotonic() - started < 15
    lines = start_failures(err)
    assert lines == [f"nakadi: cannot start: PostgreSQL at 127.0.0.1:{dead}/nakadi is "
                     f"unreachable ({lines[0].split('(', 1)[1]}"]
    assert "Traceback" not in err


def test_start_fails_in_one_line_without_the_password_on_a_url_libpq_cannot_read(server_env):
    # An unencoded "%" in the password: libpq's "invalid dsn" quotes the password, and
    # before, its traceback went to the log.
    env = dict(server_env,
               NAKADI_DATABASE_URL="postgresql://nakadi:pw%zzSECRET@127.0.0.1:1/nakadi")
    code, err = wait_for_exit(start_gunicorn(env, free_port()), 20)
    assert code != 0
    [line] = start_failures(err)
    assert line.startswith("nakadi: cannot start: NAKADI_DATABASE_URL is not a connection URL "
                           "libpq can read")
    assert "SECRET" not in err
    assert "Traceback" not in err


def test_start_fails_fast_naming_an_unreachable_zookeeper(server_env):
    dead = free_port()
    env = dict(server_env, NAKADI_ZOOKEEPER=f"127.0.0.1:{dead}")
    code, err = wait_for_exit(start_gunicorn(env, free_port()), 20)
    assert code != 0
    [line] = start_failures(err)
    assert line.startswith(f"nakadi: cannot start: ZooKeeper at 127.0.0.1:{dead} is unreachable")
    assert "Traceback" not in err


def test_start_fails_fast_naming_an_unreachable_kafka(server_env):
    dead = free_port()
    env = dict(server_env, NAKADI_KAFKA_BOOTSTRAP_SERVERS=f"127.0.0.1:{dead}")
    code, err = wait_for_exit(start_gunicorn(env, free_port()), 20)
    assert code != 0
    [line] = start_failures(err)
    assert line.startswith(f"nakadi: cannot start: Kafka at 127.0.0.1:{dead} is unreachable")
    assert "Traceback" not in err


@pytest.mark.parametrize(("lines", "named"), [
    ("security.protocol=SSL\nssl.no.such.setting=1\n", "ssl.no.such.setting"),  # librdkafka's
    ("security.protocol=PLAINTEXT\nacks=1\n", "line 2: 'acks' cannot be set here"),  # ours
])
def test_start_fails_fast_naming_a_kafka_property_it_cannot_use(server_env, tmp_path, lines,
                                                                named):
    properties = tmp_path / "kafka.properties"
    properties.write_text(lines)
    env = dict(server_env, NAKADI_KAFKA_CLIENT_PROPERTIES=str(properties))
    code, err = wait_for_exit(start_gunicorn(env, free_port()), 20)
    assert code != 0
    [line] = start_failures(err)
    assert line.startswith(f"nakadi: cannot start: NAKADI_KAFKA_CLIENT_PROPERTIES ({properties})")
    assert named in line
    assert "Traceback" not in err


def test_the_container_health_check_follows_health(base_url, server_env):
    """The image's HEALTHCHECK command: 0 while /health/live is 200, 1 when nothing
    answers."""
    def check(bind: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "deploy.healthcheck"], cwd=ROOT,
                              env=dict(server_env, NAKADI_BIND=bind), capture_output=True,
                              text=True, timeout=10)

    serving = check("0.0.0.0:" + base_url.rsplit(":", 1)[1])
    assert serving.returncode == 0, serving.stderr
    dead = check(f"0.0.0.0:{free_port()}")
    assert dead.returncode == 1
    assert "/health" in dead.stderr


def test_the_log_is_json_lines_from_start_to_shutdown(server_env, tmp_path):
    """Log collectors parse every line: neither a warning at a worker's start nor a
    traceback at its exit may come between the JSON lines."""
    log = tmp_path / "gunicorn.log"
    port = free_port()
    process = start_gunicorn(dict(server_env, NAKADI_LOG_LEVEL="INFO"), port, log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(process, url, log)
        assert requests.get(url + "/event-types").status_code == 200
    finally:
        stop_gunicorn(process)
    lines = log.read_text().splitlines()
    assert any("Worker exiting" in line for line in lines)
    for line in lines:
        assert isinstance(json.loads(line), dict), line


def test_the_log_level_holds_for_gunicorn_s_own_lines(server_env, tmp_path):
    """gunicorn wrote its start, worker and shutdown lines at INFO whatever the level."""
    log = tmp_path / "gunicorn.log"
    port = free_port()
    process = start_gunicorn(dict(server_env, NAKADI_LOG_LEVEL="WARNING"), port, log)
    try:
        wait_until_serving(process, f"http://127.0.0.1:{port}", log)
    finally:
        stop_gunicorn(process)
    levels = {json.loads(line)["level"] for line in log.read_text().splitlines()}
    assert levels <= {"WARNING", "ERROR", "CRITICAL"}, levels


def test_instances_on_one_host_leave_no_socket_in_the_user_s_runtime_dir(server_env,
                                                                        tmp_path):
    """gunicorn 27 makes a control socket at one path per user, and each instance on a
    host unlinked the others'; the broker does without it."""
    port = free_port()
    process = start_gunicorn(dict(server_env, XDG_RUNTIME_DIR=str(tmp_path),
                                  HOME=str(tmp_path)), port, tmp_path / "gunicorn.log")
    try:
        wait_until_serving(process, f"http://127.0.0.1:{port}", tmp_path / "gunicorn.log")
        assert [path.name for path in tmp_path.rglob("*.ctl")] == []
    finally:
        stop_gunicorn(process)


def test_a_client_that_stops_reading_a_response_is_cut_off(base_url, server_env, event_type,
                                                           tmp_path):
    port = free_port()
    log = tmp_path / "gunicorn.log"
    server = start_gunicorn(server_env | {"NAKADI_RESPONSE_SEND_TIMEOUT_S": "1",
                                          "NAKADI_MAX_BODY_BYTES": "20000000"}, port, log)
    # ~8 MB of shifted cursors: more than the socket buffers can take.
    body = json.dumps([{"partition": "0", "offset": "begin", "shift": 0}] * 200_000).encode()
    connection = None
    try:
        wait_until_serving(server, f"http://127.0.0.1:{port}", log)
        connection = RawConnection(port, receive_buffer=4096)
        connection.request_head("POST", f"/event-types/{event_type}/shifted-cursors", {
            "Content-Type": "application/json", "Content-Length": str(len(body))})
        connection.send(body)
        # Reads nothing until the server gives up on it: making the response takes
        # seconds on a slow machine, then come its deadline and the last write's
        # allowance, LAST_WRITE_S (a fixed sleep of 8 s was too short on a slow day).
        wait_until(lambda: "read too little of it before its deadline" in log.read_text(),
                   timeout=60, what="the server cutting the connection off")
        status, headers = connection.head()
        assert status == 200
        # What the server had handed to its kernel comes, then the end: before, the
        # whole body came, however long the client had waited.
        assert len(connection.until_closed(within=10)) < int(headers["content-length"])
    finally:
        if connection is not None:
            connection.close()
        stop_gunicorn(server)
