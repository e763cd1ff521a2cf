"""GET /openapi.json over HTTP, and real answers of every documented resource checked
against it: each status is one the document lists for the operation, each body (every
line of a stream) matches the documented schema of its content type."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
import requests
import yaml
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from app.api.openapi import DOCUMENT
from tests.helpers.broker import business_event, new_event_type, post

STREAM = "X-Nakadi-StreamId"
DOC = yaml.safe_load(DOCUMENT.read_text())
REGISTRY = Registry().with_resource(
    "urn:nakadi-openapi", Resource.from_contents(DOC, default_specification=DRAFT202012))


def pointer(*parts: str) -> str:
    return "/".join(part.replace("~", "~0").replace("/", "~1") for part in parts)


def response_object(template: str, method: str, status: int) -> tuple[str, dict]:
    """The documented response for the status (else ``default``, for errors) and the
    JSON pointer to it."""
    responses = DOC["paths"][template][method]["responses"]
    key = str(status) if str(status) in responses else "default"
    assert key in responses and (key != "default" or status >= 400), \
        f"{method.upper()} {template} answered {status}, which the document does not list"
    at = pointer("paths", template, method, "responses", key)
    found = responses[key]
    while "$ref" in found:
        at = found["$ref"].removeprefix("#/")
        found = DOC["components"]["responses"][at.rsplit("/", 1)[1]]
    return at, found


def assert_conforms(response: requests.Response, template: str, method: str) -> list:
    """The response is what the document says for this operation; its JSON values
    (one per line for a stream)."""
    at, documented = response_object(template, method, response.status_code)
    content = documented.get("content")
    if content is None:
        assert response.content == b"", f"{method} {template}: undocumented body"
        return []
    media_type = response.headers["Content-Type"].split(";")[0]
    assert media_type in content, f"{method} {template}: {media_type} is not documented"
    schema = {"$ref": "urn:nakadi-openapi#/" + at + "/" +
              pointer("content", media_type, "schema")}
    validator = Draft202012Validator(schema, registry=REGISTRY)
    if media_type == "application/x-json-stream":
        values = [json.loads(line) for line in response.iter_lines() if line]
    elif media_type.startswith("text/"):
        values = [response.text]
    else:
        values = [response.json()]
    for value in values:
        errors = sorted(validator.iter_errors(value), key=str)
        assert not errors, f"{method} {template}: {errors[0].message} in {value}"
    return values


def test_the_definition_is_served_as_json_without_authentication(base_url):
    response = requests.get(base_url + "/openapi.json", timeout=10)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == DOC


@pytest.fixture
def event_type(base_url, default_storage) -> Iterator[str]:
    name = new_event_type(base_url, partition_strategy="user_defined")
    yield name
    requests.delete(f"{base_url}/event-types/{name}", timeout=10)


def call(base_url: str, method: str, template: str, path: str | None = None,
         **kwargs) -> list:
    response = requests.request(method, base_url + (path or template), timeout=15, **kwargs)
    return assert_conforms(response, template, method.lower())


def test_event_type_answers_follow_the_definition(base_url, event_type):
    name = event_type
    path = f"/event-types/{name}"
    call(base_url, "GET", "/health")
    call(base_url, "GET", "/registry/partition-strategies")
    call(base_url, "GET", "/registry/enrichment-strategies")
    call(base_url, "GET", "/event-types")
    stored, = call(base_url, "GET", "/event-types/{name}", path)
    call(base_url, "GET", "/event-types/{name}", "/event-types/no-such-type")
    call(base_url, "PUT", "/event-types/{name}", path, json=stored)
    call(base_url, "PUT", "/event-types/{name}", path, json={**stored, "category": "data"})
    call(base_url, "POST", "/event-types", json=stored)  # 409: taken
    call(base_url, "GET", "/event-types/{name}/schemas", path + "/schemas")
    call(base_url, "GET", "/event-types/{name}/schemas/{version}", path + "/schemas/latest")
    call(base_url, "GET", "/event-types/{name}/schemas/{version}", path + "/schemas/9.9.9")

    events = [dict(business_event(n), metadata=dict(business_event(n)["metadata"],
                                                     partition="0")) for n in range(3)]
    assert post(base_url, name, events).status_code == 200
    call(base_url, "POST", "/event-types/{name}/events", path + "/events", json=events)
    call(base_url, "POST", "/event-types/{name}/events", path + "/events",
         json=[{"order_number": 1, "metadata": events[0]["metadata"]}])  # 422 items
    lines = call(base_url, "GET", "/event-types/{name}/events", path + "/events",
                 params={"batch_limit": 2, "stream_limit": 6},
                 headers={"X-Nakadi-Cursors": '[{"partition": "0", "offset": "begin"}]'})
    assert sum(len(line.get("events", [])) for line in lines) == 6
    cursor = lines[-1]["cursor"]
    call(base_url, "GET", "/event-types/{name}/events", path + "/events",
         headers={"X-Nakadi-Cursors": '[{"partition": "9", "offset": "begin"}]'})

    call(base_url, "GET", "/event-types/{name}/partitions", path + "/partitions",
         params={"cursors": json.dumps([cursor])})
    call(base_url, "GET", "/event-types/{name}/partitions/{partition}",
         path + "/partitions/0", params={"consumed_offset": cursor["offset"]})
    call(base_url, "POST", "/event-types/{name}/cursor-distances", path + "/cursor-distances",
         json=[{"initial_cursor": {"partition": "0", "offset": "begin"},
                "final_cursor": cursor}])
    call(base_url, "POST", "/event-types/{name}/cursors-lag", path + "/cursors-lag",
         json=[cursor])
    call(base_url, "POST", "/event-types/{name}/shifted-cursors", path + "/shifted-cursors",
         json=[dict(cursor, shift=-2)])


def test_subscription_answers_follow_the_definition(base_url, event_type):
    body = {"owning_application": f"app-{uuid.uuid4().hex[:8]}", "event_types": [event_type],
            "read_from": "begin"}
    subscription, = call(base_url, "POST", "/subscriptions", json=body)
    path = f"/subscriptions/{subscription['id']}"
    try:
        call(base_url, "POST", "/subscriptions", json=body)  # 200: the same one
        call(base_url, "GET", "/subscriptions", params={"event_type": event_type,
                                                        "show_status": "true"})
        call(base_url, "GET", "/subscriptions/{subscription_id}", path)
        call(base_url, "PUT", "/subscriptions/{subscription_id}", path, json=dict(
            subscription, authorization={"admins": [{"data_type": "*", "value": "*"}],
                                         "readers": [{"data_type": "*", "value": "*"}]}))
        events = [dict(business_event(n), metadata=dict(business_event(n)["metadata"],
                                                         partition="0")) for n in range(2)]
        assert post(base_url, event_type, events).status_code == 200
        stream = requests.get(f"{base_url}{path}/events", timeout=15, params={
            "batch_limit": 2, "stream_limit": 2, "batch_flush_timeout": 1}, stream=True)
        lines = assert_conforms(stream, "/subscriptions/{subscription_id}/events", "get")
        cursor = next(line["cursor"] for line in lines if line.get("events"))
        commit = f"{path}/cursors"
        call(base_url, "POST", "/subscriptions/{subscription_id}/cursors", commit,
             json={"items": [cursor]}, headers={"X-Nakadi-StreamId": str(uuid.uuid4())})
        call(base_url, "POST", "/subscriptions/{subscription_id}/cursors", commit,
             json={"items": [cursor]}, headers={"X-Nakadi-StreamId": stream.headers[STREAM]})
        call(base_url, "POST", "/subscriptions/{subscription_id}/cursors", commit,
             json={"items": [cursor]}, headers={"X-Nakadi-StreamId": stream.headers[STREAM]})
        call(base_url, "GET", "/subscriptions/{subscription_id}/cursors", path + "/cursors")
        call(base_url, "PATCH", "/subscriptions/{subscription_id}/cursors", path + "/cursors",
             json={"items": [{k: cursor[k] for k in ("event_type", "partition", "offset")}]})
        call(base_url, "GET", "/subscriptions/{subscription_id}/stats", path + "/stats",
             params={"show_time_lag": "true"})
        call(base_url, "POST", "/subscriptions/{subscription_id}/events", path + "/events",
             json={"partitions": [{"event_type": event_type, "partition": "99"}]})
    finally:
        call(base_url, "DELETE", "/subscriptions/{subscription_id}", path)
    call(base_url, "GET", "/subscriptions/{subscription_id}", path)


def test_settings_answers_follow_the_definition(base_url):
    call(base_url, "GET", "/settings/admins")
    call(base_url, "GET", "/settings/blacklist")
    call(base_url, "GET", "/settings/features")
    call(base_url, "POST", "/settings/features", json={"feature": "no_such_feature",
                                                       "enabled": True})
    call(base_url, "PUT", "/settings/blacklist/{blacklist_type}/{name}",
         "/settings/blacklist/NOT_A_TYPE/app")


def test_operations_answers_follow_the_definition(base_url, event_type):
    call(base_url, "GET", "/metrics")
    call(base_url, "GET", "/metrics/prometheus")
    call(base_url, "GET", "/storages")
    call(base_url, "GET", "/storages/{storage_id}", "/storages/postgres")
    call(base_url, "GET", "/storages/{storage_id}", "/storages/no-such-storage")
    call(base_url, "POST", "/storages", json={"id": "x", "storage_type": "carrier-pigeon"})
    call(base_url, "DELETE", "/storages/{storage_id}", "/storages/no-such-storage")
    call(base_url, "GET", "/event-types/{name}/timelines", f"/event-types/{event_type}/timelines")
    call(base_url, "POST", "/event-types/{name}/timelines",
         f"/event-types/{event_type}/timelines", json={"storage_id": "no-such-storage"})
