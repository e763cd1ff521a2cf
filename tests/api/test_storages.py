"""``/storages`` over HTTP: listing, registering, reading and deleting storages,
the default storage, and every status of the endpoints. Storages registered
here are new rows with ids of their own; the default is never moved (other tests
create event types on it)."""

from __future__ import annotations

import uuid

import pytest
import requests

from tests.api.conftest import assert_problem
from tests.helpers.broker import new_event_type
from tests.helpers.timelines import default_storage_id, switch_timeline


def storage_id() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def storages(base_url):
    """POSTs storages; deletes those created afterwards."""
    created: list[str] = []

    def post(body: dict) -> requests.Response:
        response = requests.post(base_url + "/storages", json=body, timeout=30)
        if response.status_code == 201:
            created.append(body["id"])
        return response

    yield post
    for created_id in created:
        requests.delete(f"{base_url}/storages/{created_id}", timeout=10)


def test_the_configured_storages_are_listed(base_url, stack_env):
    response = requests.get(base_url + "/storages")
    assert response.status_code == 200
    by_id = {storage["id"]: storage for storage in response.json()}
    assert by_id["postgres"]["storage_type"] == "postgres"
    assert by_id["kafka"] == {
        "id": "kafka", "storage_type": "kafka", "default": by_id["kafka"]["default"],
        "kafka_configuration": {
            "bootstrap_servers": stack_env["NAKADI_KAFKA_BOOTSTRAP_SERVERS"]}}
    assert sum(storage["default"] for storage in by_id.values()) == 1


def test_a_storage_is_registered_read_and_deleted(base_url, storages, stack_env):
    kafka = {"id": storage_id(), "storage_type": "kafka", "kafka_configuration": {
        "bootstrap_servers": stack_env["NAKADI_KAFKA_BOOTSTRAP_SERVERS"],
        "zk_address": "ignored:2181"}}
    created = storages(kafka)
    assert created.status_code == 201, created.text
    assert created.json() == {"id": kafka["id"], "storage_type": "kafka", "default": False,
                              "kafka_configuration": {"bootstrap_servers":
                                                      kafka["kafka_configuration"][
                                                          "bootstrap_servers"]}}
    assert requests.get(f"{base_url}/storages/{kafka['id']}").json() == created.json()
    assert_problem(storages(kafka), 409)

    url = stack_env["NAKADI_DATABASE_URL"]
    postgres = {"id": storage_id(), "storage_type": "postgres",
                "postgres_configuration": {"database_url": url}}
    assert storages(postgres).status_code == 201
    assert storages({"id": storage_id(), "storage_type": "postgres"}).status_code == 201

    deleted = requests.delete(f"{base_url}/storages/{kafka['id']}")
    assert deleted.status_code == 204 and not deleted.content
    assert_problem(requests.get(f"{base_url}/storages/{kafka['id']}"), 404)
    assert_problem(requests.delete(f"{base_url}/storages/{kafka['id']}"), 404)


def test_passwords_of_database_urls_are_not_shown(base_url, storages, stack_env):
    url = stack_env["NAKADI_DATABASE_URL"]
    user, _, host = url.partition("://")[2].partition("@")
    with_password = f"postgresql://{user}:secret@{host}"
    body = {"id": storage_id(), "storage_type": "postgres",
            "postgres_configuration": {"database_url": with_password}}
    response = storages(body)
    assert response.status_code == 201, response.text
    assert "secret" not in response.text
    assert f"{user}:***@" in response.json()["postgres_configuration"]["database_url"]
    assert "secret" not in requests.get(base_url + "/storages").text


@pytest.mark.parametrize("password", ["p[w", "p]w"])
def test_a_database_url_libpq_reads_but_a_url_parser_cannot_is_a_422_and_not_stored(
        base_url, storages, stack_env, password):
    """libpq connects with such a URL; the view that masks its password could not read
    it, so every listing of storages failed once it was stored."""
    user, _, host = stack_env["NAKADI_DATABASE_URL"].partition("://")[2].partition("@")
    target = storage_id()
    body = {"id": target, "storage_type": "postgres",
            "postgres_configuration": {"database_url": f"postgresql://{user}:{password}@{host}"}}
    detail = assert_problem(storages(body), 422)["detail"]
    assert "postgres_configuration.database_url" in detail and "percent-encode" in detail
    assert_problem(requests.get(f"{base_url}/storages/{target}"), 404)
    assert requests.get(base_url + "/storages").status_code == 200


@pytest.mark.parametrize(("body", "expected"), [
    ([], "the body must be a Storage object"),
    ({"storage_type": "kafka"}, "id: is required"),
    ({"id": "has space", "storage_type": "postgres"}, "id: is required"),
    ({"id": "x" * 37, "storage_type": "postgres"}, "id: is required"),
    ({"id": "s\n", "storage_type": "postgres"}, "id: is required"),  # Python's $ took it
    ({"id": "s", "storage_type": "redis"}, "storage_type: must be one of kafka, postgres"),
    ({"id": "s", "storage_type": "kafka"}, "kafka_configuration: is required"),
    ({"id": "s", "storage_type": "kafka", "kafka_configuration": {}},
     "kafka_configuration.bootstrap_servers: is required"),
    ({"id": "s", "storage_type": "kafka",
      "kafka_configuration": {"bootstrap_servers": "broker"}},
     "'broker' is not host:port"),
    ({"id": "s", "storage_type": "kafka",
      "kafka_configuration": {"bootstrap_servers": "a:9092,b:99999"}},
     "'b:99999' is not host:port"),
    ({"id": "s", "storage_type": "postgres",
      "kafka_configuration": {"bootstrap_servers": "a:9092"}},
     "kafka_configuration: only a storage of storage_type 'kafka'"),
    ({"id": "s", "storage_type": "postgres",
      "postgres_configuration": {"database_url": "mysql://x"}},
     "postgres_configuration.database_url: must be a PostgreSQL URL"),
    ({"id": "s", "storage_type": "postgres",
      "postgres_configuration": {"database_url": "postgresql://nakadi@127.0.0.1:1/none"}},
     "the storage does not answer"),
])
def test_invalid_storages_are_422s_naming_the_field(base_url, storages, body, expected):
    assert expected in assert_problem(storages(body), 422)["detail"]


def test_a_storage_in_use_or_default_cannot_be_deleted(base_url, storages):
    target = storage_id()
    assert storages({"id": target, "storage_type": "postgres"}).status_code == 201
    name = new_event_type(base_url)
    assert switch_timeline(base_url, name, target).status_code == 201
    detail = assert_problem(requests.delete(f"{base_url}/storages/{target}"), 422)["detail"]
    assert f"holds timelines of event types '{name}'" in detail
    default = default_storage_id(base_url)
    detail = assert_problem(requests.delete(f"{base_url}/storages/{default}"), 422)["detail"]
    assert "is the default storage" in detail
    requests.delete(f"{base_url}/event-types/{name}")


def test_the_default_storage_is_set_and_unknown_storages_are_404s(base_url):
    default = default_storage_id(base_url)
    response = requests.put(f"{base_url}/storages/default/{default}")
    assert response.status_code == 200
    assert response.json()["id"] == default and response.json()["default"] is True
    assert_problem(requests.put(f"{base_url}/storages/default/no-such-storage"), 404)
    assert default_storage_id(base_url) == default
    assert_problem(requests.get(f"{base_url}/storages/no-such-storage"), 404)
