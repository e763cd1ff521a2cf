"""A gunicorn with authentication on, against the tests' own token-info service, and
event types protected by an authorization section. The session's ``base_url``
server stays open for every other test; settings changed here are reset after
each test."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import trustme

from app.repository.security_settings import NOTIFY_CHANGE
from deploy.localstack import free_port
from tests.api.conftest import start_gunicorn, stop_gunicorn, wait_until_serving
from tests.helpers.tokeninfo import EMPLOYEES, SERVICES, TokenInfoStub

READ_SCOPE, WRITE_SCOPE, ADMIN_SCOPE, CONFIG_SCOPE = (
    "nakadi.event_stream.read", "nakadi.event_stream.write", "nakadi.event_type.write",
    "nakadi.config.write")
ALL_SCOPES = [READ_SCOPE, WRITE_SCOPE, ADMIN_SCOPE, CONFIG_SCOPE]
TOKENS = {
    "alice-token": {"uid": "alice", "realm": EMPLOYEES, "scope": ALL_SCOPES},
    "bob-token": {"uid": "bob", "realm": EMPLOYEES, "scope": ALL_SCOPES},
    "app-token": {"uid": "stups_app", "realm": SERVICES, "scope": ALL_SCOPES},
    "root-token": {"uid": "root", "realm": EMPLOYEES, "scope": ALL_SCOPES},
    "carol-token": {"uid": "carol", "realm": EMPLOYEES, "scope": ["uid"]},
    "dave-token": {"uid": "dave", "realm": EMPLOYEES, "scope": ALL_SCOPES[:3]},
    "robot-token": {"uid": "r2d2", "realm": "/robots", "scope": ALL_SCOPES},
}
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}
# alice administers and writes, the service stups_app reads.
PROTECTED = {"admins": [{"data_type": "user", "value": "alice"}],
             "readers": [{"data_type": "service", "value": "stups_app"}],
             "writers": [{"data_type": "user", "value": "alice"}]}
EVERYONE = [{"data_type": "*", "value": "*"}]


def auth(who: str) -> dict[str, str]:
    """The Authorization header of a test token (``alice``, ``app``, ``root``...)."""
    return {"Authorization": f"Bearer {who}-token"}


def event_type_body(name: str, authorization: dict | None) -> dict:
    body = {"name": name, "owning_application": "producer", "category": "business",
            "enrichment_strategies": ["metadata_enrichment"], "partition_strategy": "random",
            "schema": {"type": "json_schema", "schema": json.dumps(SCHEMA)}}
    if authorization is not None:
        body["authorization"] = authorization
    return body


def business_event(n: int = 1) -> dict:
    return {"n": n, "metadata": {"eid": str(uuid.uuid4()),
                                 "occurred_at": "2026-11-22T12:00:00Z"}}


@pytest.fixture(scope="session")
def token_info_ca() -> trustme.CA:
    """The authority of the token-info service's certificate."""
    return trustme.CA()


@pytest.fixture(scope="session")
def token_info(token_info_ca) -> Iterator[TokenInfoStub]:
    """The token-info service, over HTTPS as real ones are."""
    stub = TokenInfoStub(TOKENS, slow_s=3.0, ca=token_info_ca).start()
    yield stub
    stub.stop()


@pytest.fixture(scope="session")
def secure_server(stack_env, token_info, token_info_ca, tmp_path_factory
                  ) -> Iterator[tuple[str, Path]]:
    """(URL, log file) of a gunicorn with authentication on; root is a Nakadi admin.
    It trusts the token-info service's authority as a deployment would its own."""
    ca_bundle = tmp_path_factory.mktemp("token-info-ca") / "ca.pem"
    token_info_ca.cert_pem.write_to_path(str(ca_bundle))
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAKADI_")}
    env.update(stack_env, REQUESTS_CA_BUNDLE=str(ca_bundle),
               NAKADI_OAUTH2_TOKENINFO_URL=token_info.url,
               NAKADI_OAUTH2_TOKENINFO_TIMEOUT_S="0.5", NAKADI_ADMINS="user:root",
               NAKADI_OAUTH2_READ_SCOPE=READ_SCOPE, NAKADI_OAUTH2_WRITE_SCOPE=WRITE_SCOPE,
               NAKADI_OAUTH2_ADMIN_SCOPE=ADMIN_SCOPE, NAKADI_OAUTH2_CONFIG_SCOPE=CONFIG_SCOPE)
    port = free_port()
    log = tmp_path_factory.mktemp("secure-gunicorn") / "gunicorn.log"
    process = start_gunicorn(env, port, log)
    url = f"http://127.0.0.1:{port}"
    wait_until_serving(process, url, log)
    yield url, log
    stop_gunicorn(process)


@pytest.fixture
def secure_url(secure_server, reset_security_settings) -> str:
    return secure_server[0]


@pytest.fixture
def reset_security_settings(pool) -> Iterator[None]:
    """Admins, blacklist and features as configured, after each test."""
    yield
    with pool.transaction() as cursor:
        cursor.execute("DELETE FROM nakadi_admins")
        cursor.execute("DELETE FROM blacklist")
        cursor.execute("DELETE FROM feature_toggles")
        cursor.execute(NOTIFY_CHANGE)


@pytest.fixture
def protected_event_types(secure_url) -> Iterator:
    """Creates event types (as root) with an authorization section, PROTECTED unless
    told; deletes them afterwards."""
    created: list[str] = []

    def create(authorization: dict | None = PROTECTED) -> str:
        name = f"sec.test-{uuid.uuid4().hex[:10]}"
        response = requests.post(secure_url + "/event-types", headers=auth("root"),
                                 json=event_type_body(name, authorization))
        assert response.status_code == 201, response.text
        created.append(name)
        return name

    yield create
    for name in created:
        requests.delete(f"{secure_url}/event-types/{name}", headers=auth("root"))
