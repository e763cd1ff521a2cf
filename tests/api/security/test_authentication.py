"""Authentication over HTTP: a gunicorn with authentication on asks the tests'
token-info service (over HTTPS) who a bearer token belongs to."""

from __future__ import annotations

import json
import os
import uuid

import pytest
import requests

from deploy.localstack import free_port
from tests.api.conftest import assert_problem, start_gunicorn, stop_gunicorn, wait_until_serving
from tests.api.security.conftest import auth, business_event, event_type_body
from tests.helpers.waiting import wait_until


def test_without_a_token_every_endpoint_but_health_is_a_401_with_a_challenge(secure_url):
    for method, path in (("GET", "/event-types"), ("POST", "/event-types"),
                         ("GET", "/subscriptions"), ("GET", "/settings/admins"),
                         ("GET", "/no-such-endpoint"), ("GET", "/event-types/")):
        response = requests.request(method, secure_url + path)
        assert "OAuth2 bearer token" in assert_problem(response, 401)["detail"]
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="nakadi"'
    assert requests.get(secure_url + "/health").status_code == 200
    assert requests.get(secure_url + "/health/").status_code == 200
    assert requests.get(secure_url + "/health/live").json() == {"status": "OK"}
    # A method the open paths do not take is the 405 it is with a token.
    for path in ("/health", "/health/", "/health/live"):
        assert_problem(requests.post(secure_url + path), 405)


def test_a_valid_token_is_accepted(secure_url, token_info):
    """Over HTTPS, as real token-info services answer: workers whose master imported
    urllib3 before gevent patched ssl failed every such lookup with a 500."""
    assert token_info.url.startswith("https://")
    assert requests.get(secure_url + "/event-types", headers=auth("alice")).status_code == 200
    assert requests.get(secure_url + "/event-types", headers=auth("app")).status_code == 200


@pytest.mark.parametrize("header", [
    "Basic YWxpY2U6c2VjcmV0", "Bearer", "Bearer ", "bearer", "Token alice-token",
    "Bearer alice-token extra", 'Bearer "alice-token"', "Bearer al\u00e9ice",
    "Bearer " + "a" * 5000, "alice-token",
])
def test_malformed_authorization_headers_are_401s(secure_url, header):
    response = requests.get(secure_url + "/event-types",
                            headers={"Authorization": header.encode("latin-1")})
    assert_problem(response, 401)
    assert response.headers["WWW-Authenticate"].startswith('Bearer realm="nakadi", error=')


def test_a_token_too_large_for_a_header_is_a_431_problem(secure_url):
    response = requests.get(secure_url + "/event-types",
                            headers={"Authorization": "Bearer " + "a" * 20000})
    assert_problem(response, 431)


@pytest.mark.parametrize("token", ["unknown", "expired", "robot"])
def test_tokens_the_broker_does_not_accept_are_401s(secure_url, token):
    response = requests.get(secure_url + "/event-types", headers=auth(token))
    assert_problem(response, 401)
    assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]


@pytest.mark.parametrize("token", ["garbage", "broken", "slow"])
def test_a_token_info_service_that_fails_is_a_503_never_allowed(secure_url, token):
    response = requests.post(secure_url + "/event-types/anything/events", headers=auth(token),
                             json=[business_event()])
    assert "Authentication is unavailable" in assert_problem(response, 503)["detail"]


def test_a_token_info_certificate_the_broker_does_not_trust_is_a_503(stack_env, token_info,
                                                                     tmp_path):
    """A deployment without its company's CA bundle: every authenticated request is a
    503 naming authentication, never a 500 and never allowed; the log says why."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("NAKADI_") and k != "REQUESTS_CA_BUNDLE"}
    env.update(stack_env, NAKADI_OAUTH2_TOKENINFO_URL=token_info.url)
    port, log = free_port(), tmp_path / "gunicorn.log"
    process = start_gunicorn(env, port, log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(process, url, log)
        response = requests.get(url + "/event-types", headers=auth("alice"))
        assert "Authentication is unavailable" in assert_problem(response, 503)["detail"]
    finally:
        stop_gunicorn(process)
    assert "token-info request failed: SSLError" in log.read_text()


def test_token_info_answers_are_cached(secure_url, token_info):
    before = token_info.calls["bob-token"]
    for _ in range(10):
        assert requests.get(secure_url + "/event-types", headers=auth("bob")).status_code == 200
    assert token_info.calls["bob-token"] - before <= 2  # once per worker process at most


def test_missing_scope_is_a_403_naming_it(secure_url, protected_event_types):
    name = protected_event_types()
    response = requests.post(f"{secure_url}/event-types/{name}/events", headers=auth("carol"),
                             json=[business_event()])
    assert "nakadi.event_stream.write" in assert_problem(response, 403)["detail"]
    assert 'error="insufficient_scope"' in response.headers["WWW-Authenticate"]
    # Endpoints that declare no kind of action need authentication only.
    assert requests.get(secure_url + "/event-types", headers=auth("carol")).status_code == 200


@pytest.mark.parametrize("path", ["/subscriptions", f"/subscriptions/{uuid.uuid4()}",
                                  "/registry/partition-strategies",
                                  "/registry/enrichment-strategies"])
def test_reading_subscriptions_and_the_registry_needs_the_read_scope(secure_url, path):
    """The spec asks nakadi.event_stream.read of these; they asked for none."""
    response = requests.get(secure_url + path, headers=auth("carol"))
    assert "nakadi.event_stream.read" in assert_problem(response, 403)["detail"]
    assert requests.get(secure_url + "/subscriptions", headers=auth("bob")).status_code == 200


def test_deleting_an_event_type_needs_the_config_scope(secure_url):
    """001: defining event types asks nakadi.event_type.write, deleting one (as the
    settings, storages and timelines) nakadi.config.write."""
    name = f"sec.test-{uuid.uuid4().hex[:10]}"
    response = requests.post(secure_url + "/event-types", headers=auth("dave"),
                             json=event_type_body(name, None))
    assert response.status_code == 201, response.text
    for path in (f"/event-types/{name}", "/settings/blacklist/CONSUMER_APP/someone"):
        response = requests.delete(secure_url + path, headers=auth("dave"))
        assert "nakadi.config.write" in assert_problem(response, 403)["detail"]
    response = requests.delete(f"{secure_url}/event-types/{name}", headers=auth("alice"))
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("path", ["/metrics", "/metrics/prometheus"])
def test_metrics_need_authentication_but_no_scope(secure_url, path):
    """001 asks no scope of /metrics: monitoring agents need no rights of their own."""
    assert requests.get(secure_url + path, headers=auth("carol")).status_code == 200
    assert_problem(requests.get(secure_url + path), 401)


def test_the_subject_reaches_the_logs_and_the_token_never_does(secure_server, secure_url):
    _, log = secure_server
    requests.get(secure_url + "/event-types", headers={**auth("alice"), "X-Flow-Id": "who-1"})

    def logged() -> list[str]:
        return [line for line in log.read_text().splitlines() if '"who-1"' in line]

    line = wait_until(logged, what="the access log line")[0]
    assert json.loads(line)["subject"] == "user:alice"
    assert "alice-token" not in log.read_text()
