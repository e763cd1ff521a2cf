"""The event-type registry over HTTP, on each storage engine."""

from __future__ import annotations

import copy
import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from app.domain.event_type import KEEP_FOREVER
from app.repository.event_types import event_type_with_timelines
from app.storage.engine import PartitionBounds
from tests.api.conftest import assert_problem
from tests.conftest import topic_listed
from tests.helpers.storage import (
    compact_postgres_now,
    engine_for,
    kafka_topic,
    topic_retention_ms,
)
from tests.helpers.waiting import wait_until

ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "order_number": {"type": "string"},
        "amount": {"type": "number"},
    },
    "required": ["order_number"],
}


def business_event_type(name: str | None = None, **overrides) -> dict:
    body = {
        "name": name or f"test.order-{uuid.uuid4().hex[:10]}",
        "owning_application": "order-service",
        "category": "business",
        "enrichment_strategies": ["metadata_enrichment"],
        "schema": {"type": "json_schema", "schema": json.dumps(ORDER_SCHEMA)},
    }
    body.update(overrides)
    return body


@pytest.fixture
def created(base_url, default_storage):
    body = business_event_type()
    response = requests.post(base_url + "/event-types", json=body)
    assert response.status_code == 201, response.text
    yield body
    requests.delete(f"{base_url}/event-types/{body['name']}")


def test_created_event_type_has_every_default_and_a_topic(base_url, created, pool,
                                                          default_storage):
    response = requests.get(f"{base_url}/event-types/{created['name']}")
    assert response.status_code == 200
    body = response.json()
    assert body["name"] == created["name"]
    assert body["partition_strategy"] == "random"
    assert body["compatibility_mode"] == "forward"
    assert body["cleanup_policy"] == "delete"
    assert body["options"] == {"retention_time": 345600000}
    assert body["partition_key_fields"] == []
    assert body["schema"]["version"] == "1.0.0"
    assert body["schema"]["schema"] == created["schema"]["schema"]
    assert body["schema"]["created_at"].endswith("Z")
    assert body["created_at"] == body["updated_at"]
    timeline = event_type_with_timelines(pool, created["name"])[1].active
    assert timeline.storage_id == default_storage
    engine = engine_for(pool, default_storage)
    try:
        assert engine.bounds(timeline.topic) == [PartitionBounds(0, 0, -1)]
    finally:
        engine.close()


def test_a_new_retention_time_reaches_every_timeline_of_the_storage(base_url, created, pool,
                                                                   default_storage):
    """It changed the document only: events went by the old time (earlier than promised
    when it grew), until a timeline switch made a new topic."""
    name = created["name"]
    topic = event_type_with_timelines(pool, name)[1].active.topic
    assert topic_retention_ms(pool, default_storage, topic) == 345600000
    body = requests.get(f"{base_url}/event-types/{name}").json()
    response = requests.put(f"{base_url}/event-types/{name}",
                            json={**body, "options": {"retention_time": 86400000}})
    assert response.status_code == 200, response.text
    assert topic_retention_ms(pool, default_storage, topic) == 86400000
    assert requests.get(f"{base_url}/event-types/{name}").json()["options"] == {
        "retention_time": 86400000}


def test_a_compacted_event_types_topics_keep_events_whatever_their_age(base_url, pool,
                                                                      default_storage):
    """Compaction keeps each key's latest event: removed by age (four days by default),
    it was gone. A new retention time leaves such topics as they are."""
    body = business_event_type(cleanup_policy="compact",
                               options={"retention_time": 86400000})
    assert requests.post(base_url + "/event-types", json=body).status_code == 201
    name = body["name"]
    try:
        topic = event_type_with_timelines(pool, name)[1].active.topic
        assert topic_retention_ms(pool, default_storage, topic) == KEEP_FOREVER
        stored = requests.get(f"{base_url}/event-types/{name}").json()
        response = requests.put(f"{base_url}/event-types/{name}",
                                json={**stored, "options": {"retention_time": 172800000}})
        assert response.status_code == 200, response.text
        assert topic_retention_ms(pool, default_storage, topic) == KEEP_FOREVER
    finally:
        requests.delete(f"{base_url}/event-types/{name}")


def test_a_compacted_event_type_stores_each_event_under_its_compaction_key(
        base_url, pool, default_storage):
    """Kafka compacts a topic by record key: the topic is made compacted and each record
    keyed by metadata.partition_compaction_key (PostgreSQL reads it from the events)."""
    body = business_event_type(cleanup_policy="compact")
    assert requests.post(base_url + "/event-types", json=body).status_code == 201
    name = body["name"]
    try:
        events = [{"order_number": f"o-{n}", "metadata": {
            "eid": str(uuid.uuid4()), "occurred_at": "2026-11-27T10:00:00Z",
            "partition_compaction_key": key}} for n, key in enumerate(["k1", "k2", "k1"])]
        response = requests.post(f"{base_url}/event-types/{name}/events", json=events)
        assert response.status_code == 200, response.text
        if default_storage == "kafka":
            topic = event_type_with_timelines(pool, name)[1].active.topic
            config, keys = kafka_topic(pool, default_storage, topic, 1)
            assert config["cleanup.policy"] == "compact"
            assert keys == [b"k1", b"k2", b"k1"]
    finally:
        requests.delete(f"{base_url}/event-types/{name}")


def test_postgresql_compaction_leaves_each_keys_latest_event_to_every_stream(base_url, pool):
    """Streams, low-level and subscription ones, skip the events compaction removed,
    and their cursors name the offsets of the events they send."""
    body = business_event_type(cleanup_policy="compact", default_statistic={
        "messages_per_minute": 1, "message_size": 1, "read_parallelism": 1,
        "write_parallelism": 1})
    assert requests.post(base_url + "/event-types", json=body).status_code == 201
    name = body["name"]
    subscription_id = None
    try:
        events = [{"order_number": f"o-{n}", "metadata": {
            "eid": str(uuid.uuid4()), "occurred_at": "2026-11-27T10:00:00Z",
            "partition_compaction_key": key}} for n, key in enumerate("abab")]
        response = requests.post(f"{base_url}/event-types/{name}/events", json=events)
        assert response.status_code == 200, response.text
        requests.post(f"{base_url}/event-types/{name}/events", json=events[3:])  # o-3 again
        compact_postgres_now(pool)  # every compacted topic: its count tells little
        stream = requests.get(
            f"{base_url}/event-types/{name}/events", timeout=30,
            headers={"X-Nakadi-Cursors": '[{"partition": "0", "offset": "begin"}]'},
            params={"batch_limit": 1, "stream_limit": 2, "batch_flush_timeout": 1})
        batches = [json.loads(line) for line in stream.text.splitlines()]
        sent = [(int(b["cursor"]["offset"].rsplit("-", 1)[1]), b["events"][0]["order_number"])
                for b in batches if b.get("events")]
        assert sent == [(2, "o-2"), (4, "o-3")]

        response = requests.post(base_url + "/subscriptions", json={
            "owning_application": "compaction-test", "event_types": [name],
            "read_from": "begin"})
        subscription_id = response.json()["id"]
        stream = requests.get(f"{base_url}/subscriptions/{subscription_id}/events", timeout=30,
                              params={"batch_limit": 1, "stream_limit": 2,
                                      "batch_flush_timeout": 1})
        batches = [json.loads(line) for line in stream.text.splitlines()]
        assert [(int(b["cursor"]["offset"].rsplit("-", 1)[1]), b["events"][0]["order_number"])
                for b in batches if b.get("events")] == sent
    finally:
        if subscription_id:
            requests.delete(f"{base_url}/subscriptions/{subscription_id}")
        requests.delete(f"{base_url}/event-types/{name}")


def test_event_type_is_listed(base_url, created):
    names = [et["name"] for et in requests.get(base_url + "/event-types").json()]
    assert created["name"] in names


def test_duplicate_name_is_a_409(base_url, created):
    body = assert_problem(requests.post(base_url + "/event-types", json=created), 409)
    assert created["name"] in body["detail"]


def test_unknown_event_type_is_a_404(base_url):
    for method in (requests.get, requests.put, requests.delete):
        body = assert_problem(method(base_url + "/event-types/no.such-type", json={}), 404)
        assert "no.such-type" in body["detail"]


def test_partition_count_follows_default_statistic(base_url, pool, default_storage):
    body = business_event_type(default_statistic={
        "messages_per_minute": 1000, "message_size": 200,
        "read_parallelism": 2, "write_parallelism": 4})
    assert requests.post(base_url + "/event-types", json=body).status_code == 201
    try:
        timeline = event_type_with_timelines(pool, body["name"])[1].active
        assert timeline.partitions == 4
        engine = engine_for(pool, default_storage)
        try:
            assert len(engine.bounds(timeline.topic)) == 4
        finally:
            engine.close()
    finally:
        requests.delete(f"{base_url}/event-types/{body['name']}")


def test_delete_removes_event_type_schemas_and_topic(base_url, pool, default_storage):
    body = business_event_type()
    assert requests.post(base_url + "/event-types", json=body).status_code == 201
    topic = event_type_with_timelines(pool, body["name"])[1].active.topic
    assert requests.delete(f"{base_url}/event-types/{body['name']}").status_code == 200
    assert_problem(requests.get(f"{base_url}/event-types/{body['name']}"), 404)
    assert_problem(requests.get(f"{base_url}/event-types/{body['name']}/schemas"), 404)
    assert pool.fetch_all("SELECT count(*) FROM event_type_schemas WHERE event_type = %s",
                          (body["name"],)) == [(0,)]
    # The topic goes shortly after the answer, once streams had time to end.
    wait_until(lambda: not topic_listed(pool, default_storage, topic),
               what="the topic's deletion")
    # The name is free again.
    assert requests.post(base_url + "/event-types", json=body).status_code == 201
    requests.delete(f"{base_url}/event-types/{body['name']}")


# -- validation over HTTP: one bad input per rule, each answered 422 naming the field --------

def _with_schema(schema: dict, **overrides) -> dict:
    return business_event_type(schema={"type": "json_schema", "schema": json.dumps(schema)},
                               **overrides)


INVALID = [
    ({"name": "1starts-with-digit"}, "name"),
    ({"name": "has space"}, "name"),
    ({"name": "x" * 256}, "name"),
    ({"owning_application": None}, "owning_application"),
    ({"category": "gossip"}, "category"),
    ({"partition_strategy": "round_robin"}, "partition_strategy"),
    ({"enrichment_strategies": ["magic"]}, "enrichment_strategies[0]"),
    ({"enrichment_strategies": []}, "enrichment_strategies"),
    ({"category": "undefined"}, "enrichment_strategies"),
    ({"schema": {"type": "avro_schema", "schema": "{}"}}, "schema.type"),
    ({"schema": {"type": "json_schema", "schema": "{not json"}}, "schema.schema"),
    ({"schema": {"type": "json_schema", "schema": '{"type": "object", "required": "x"}'}},
     "schema.schema"),
    ({"schema": {"type": "json_schema",
                 "schema": '{"properties": {"a": {"$ref": "#/definitions/missing"}}}'}},
     "schema.schema"),
    ({"partition_strategy": "hash"}, "partition_key_fields"),
    ({"partition_strategy": "hash", "partition_key_fields": ["no_such_field"]},
     "partition_key_fields[0]"),
    ({"partition_key_fields": ["order_number"]}, "partition_key_fields"),
    ({"compatibility_mode": "compatible",
      "schema": {"type": "json_schema",
                 "schema": '{"type": "object", "additionalProperties": {"type": "string"}}'}},
     "schema.schema"),
    ({"schema": {"type": "json_schema",
                 "schema": '{"type": "object", "properties": {"metadata": {}}}'}},
     "schema.schema"),
    ({"cleanup_policy": "shred"}, "cleanup_policy"),
    ({"category": "undefined", "enrichment_strategies": [], "cleanup_policy": "compact"},
     "cleanup_policy"),
    ({"audience": "everyone"}, "audience"),
    ({"ordering_key_fields": ["not_there"]}, "ordering_key_fields[0]"),
    ({"options": {"retention_time": 1000}}, "options.retention_time"),
    ({"default_statistic": {"messages_per_minute": 0, "message_size": 1,
                            "read_parallelism": 1, "write_parallelism": 1}},
     "default_statistic.messages_per_minute"),
    ({"authorization": {"admins": [], "readers": [{"data_type": "user", "value": "a"}],
                        "writers": [{"data_type": "user", "value": "a"}]}},
     "authorization.admins"),
    ({"authorization": {"admins": [{"data_type": "user"}],
                        "readers": [{"data_type": "user", "value": "a"}],
                        "writers": [{"data_type": "user", "value": "a"}]}},
     "authorization.admins[0].value"),
    ({"labels": ["team-a"]}, "labels"),
    ({"labels": {"team": 1}}, "labels.team"),
    ({"annotations": "owner=a"}, "annotations"),
    ({"event_owner_selector": {"type": "path", "name": "owner"}}, "event_owner_selector.value"),
    ({"ordering_instance_ids": "order_number"}, "ordering_instance_ids"),
    ({"authorization": {"admins": [{"data_type": "user", "value": "a"}]}},
     "authorization.readers"),
]


@pytest.mark.parametrize(("overrides", "field"), INVALID)
def test_invalid_event_type_is_a_422_naming_the_field(base_url, overrides, field):
    body = business_event_type(**overrides)
    if overrides.get("owning_application", "") is None:
        del body["owning_application"]
    problem = assert_problem(requests.post(base_url + "/event-types", json=body), 422)
    assert f"{field}:" in problem["detail"]
    assert requests.get(f"{base_url}/event-types/{body['name']}").status_code == 404


def test_data_schema_describes_data_and_keys_are_relative_to_it(base_url):
    body = _with_schema(ORDER_SCHEMA, category="data", partition_strategy="hash",
                        partition_key_fields=["order_number"])
    assert requests.post(base_url + "/event-types", json=body).status_code == 201
    requests.delete(f"{base_url}/event-types/{body['name']}")
    body = _with_schema(ORDER_SCHEMA, category="data", partition_strategy="hash",
                        partition_key_fields=["data.order_number"])
    problem = assert_problem(requests.post(base_url + "/event-types", json=body), 422)
    assert "partition_key_fields" in problem["detail"]


@pytest.mark.parametrize(("data", "content_type", "status"), [
    ("[1, 2]", "application/json", 422),
    ('"just a string"', "application/json", 422),
    ("{broken", "application/json", 400),
    ("name=x", "application/x-www-form-urlencoded", 415),
])
def test_malformed_bodies_are_clear_problems(base_url, data, content_type, status):
    response = requests.post(base_url + "/event-types", data=data,
                             headers={"Content-Type": content_type})
    assert_problem(response, status)


# -- updates, schema evolution, schema listing ---------------------------------------------

def put(base_url, body) -> requests.Response:
    return requests.put(f"{base_url}/event-types/{body['name']}", json=body)


def test_schema_evolution_versions_and_history(base_url, created):
    name = created["name"]
    evolved = copy.deepcopy(created)
    schema = copy.deepcopy(ORDER_SCHEMA)
    schema["properties"]["note"] = {"type": "string"}
    evolved["schema"]["schema"] = json.dumps(schema)
    assert put(base_url, evolved).status_code == 200
    assert requests.get(f"{base_url}/event-types/{name}").json()["schema"]["version"] == "1.1.0"

    schema["description"] = "an order"
    evolved["schema"]["schema"] = json.dumps(schema)
    assert put(base_url, evolved).status_code == 200
    current = requests.get(f"{base_url}/event-types/{name}").json()
    assert current["schema"]["version"] == "1.1.1"
    assert current["updated_at"] >= current["created_at"]

    assert put(base_url, evolved).status_code == 200  # no change, no new version
    listing = requests.get(f"{base_url}/event-types/{name}/schemas").json()
    assert [item["version"] for item in listing["items"]] == ["1.1.1", "1.1.0", "1.0.0"]
    assert listing["_links"] == {}
    assert requests.get(f"{base_url}/event-types/{name}/schemas/latest").json()["version"] \
        == "1.1.1"
    first = requests.get(f"{base_url}/event-types/{name}/schemas/1.0.0").json()
    assert first["schema"] == created["schema"]["schema"]
    assert_problem(requests.get(f"{base_url}/event-types/{name}/schemas/7.0.0"), 404)
    assert_problem(requests.get(f"{base_url}/event-types/{name}/schemas/newest"), 404)

    page = requests.get(f"{base_url}/event-types/{name}/schemas?offset=1&limit=1").json()
    assert [item["version"] for item in page["items"]] == ["1.1.0"]
    assert page["_links"] == {
        "prev": {"href": f"/event-types/{name}/schemas?offset=0&limit=1"},
        "next": {"href": f"/event-types/{name}/schemas?offset=2&limit=1"},
    }
    for bad in ("limit=0", "limit=1001", "offset=-1", "limit=many"):
        problem = assert_problem(
            requests.get(f"{base_url}/event-types/{name}/schemas?{bad}"), 400)
        assert bad.split("=")[0] in problem["detail"]


def test_refused_changes_are_422_naming_the_change(base_url, created):
    removed = copy.deepcopy(created)
    schema = copy.deepcopy(ORDER_SCHEMA)
    del schema["properties"]["amount"]
    removed["schema"]["schema"] = json.dumps(schema)
    problem = assert_problem(put(base_url, removed), 422)
    assert "schema.schema" in problem["detail"] and "amount" in problem["detail"]

    for field, value in [("category", "data"), ("cleanup_policy", "compact"),
                         ("compatibility_mode", "none")]:
        changed = dict(created, **{field: value})
        problem = assert_problem(put(base_url, changed), 422)
        assert f"{field}:" in problem["detail"]

    renamed = dict(created, name="other.name")
    problem = assert_problem(
        requests.put(f"{base_url}/event-types/{created['name']}", json=renamed), 422)
    assert "name" in problem["detail"]
    got = requests.get(f"{base_url}/event-types/{created['name']}").json()
    assert got["schema"]["version"] == "1.0.0" and got["category"] == "business"


def test_compatibility_mode_moves_forward_to_compatible(base_url, created):
    upgraded = dict(created, compatibility_mode="compatible")
    assert put(base_url, upgraded).status_code == 200
    got = requests.get(f"{base_url}/event-types/{created['name']}").json()
    assert got["compatibility_mode"] == "compatible"


def test_registry_lists_strategies(base_url):
    assert requests.get(base_url + "/registry/partition-strategies").json() == [
        "random", "hash", "user_defined"]
    assert requests.get(base_url + "/registry/enrichment-strategies").json() == [
        "metadata_enrichment"]


# -- clients of newer Nakadi versions ------------------------------------------------------

def clin_style(name: str | None = None) -> dict:
    """What the clin CLI (and other clients of newer Nakadi versions) send: every field they
    know, some this broker keeps and some it does not model."""
    return business_event_type(
        name,
        audience="company-internal",
        partition_strategy="hash",
        partition_key_fields=["order_number"],
        cleanup_policy="delete",
        compatibility_mode="forward",
        default_statistic={"messages_per_minute": 100, "message_size": 100,
                           "read_parallelism": 2, "write_parallelism": 2},
        options={"retention_time": 86_400_000, "compaction_lag": 5},
        authorization={
            "admins": [{"data_type": "user", "value": "jdoe"}],
            "readers": [{"data_type": "*", "value": "*"}],
            "writers": [{"data_type": "service", "value": "stups_order-service"}],
        },
        ordering_key_fields=["order_number"],
        ordering_instance_ids=["order_number"],
        event_owner_selector={"type": "path", "name": "retailer_id", "value": "order_number"},
        annotations={"nakadi.io/contact": "team-orders@example.org"},
        labels={"team": "orders"},
        schema={"type": "json_schema", "schema": json.dumps(ORDER_SCHEMA), "version": "1.0.0"},
        created_at="2020-01-01T00:00:00.000Z",
        status="active",
        repartition_policy={"partitions": 8},
    )


def test_a_clin_style_create_succeeds_and_echoes_what_the_broker_keeps(base_url):
    body = clin_style()
    assert requests.post(base_url + "/event-types", json=body).status_code == 201
    try:
        got = requests.get(f"{base_url}/event-types/{body['name']}").json()
        for field in ("audience", "authorization", "ordering_key_fields", "ordering_instance_ids",
                      "event_owner_selector", "annotations", "labels", "default_statistic"):
            assert got[field] == body[field], field
        assert got["options"] == {"retention_time": 86_400_000}
        assert "status" not in got and "repartition_policy" not in got
        assert got["created_at"] != body["created_at"]

        # The body a client got back can be PUT as it is, and changes nothing.
        assert requests.put(f"{base_url}/event-types/{body['name']}", json=got).status_code == 200
        assert requests.get(f"{base_url}/event-types/{body['name']}").json() == got

        # Labels and annotations may change; they are what the last PUT said.
        changed = dict(got, labels={"team": "payments"}, annotations=None)
        assert requests.put(f"{base_url}/event-types/{body['name']}", json=changed
                            ).status_code == 200
        after = requests.get(f"{base_url}/event-types/{body['name']}").json()
        assert after["labels"] == {"team": "payments"}
        assert "annotations" not in after
    finally:
        requests.delete(f"{base_url}/event-types/{body['name']}")


def test_event_types_without_newer_fields_show_exactly_the_spec_fields(base_url, created):
    got = requests.get(f"{base_url}/event-types/{created['name']}").json()
    assert list(got) == [
        "name", "owning_application", "category", "enrichment_strategies", "partition_strategy",
        "compatibility_mode", "schema", "partition_key_fields", "cleanup_policy",
        "default_statistic", "options", "authorization", "ordering_key_fields",
        "ordering_instance_ids", "audience", "created_at", "updated_at"]
    assert list(got["schema"]) == ["type", "schema", "version", "created_at"]


# -- POST /event-types/{name}/schemas ------------------------------------------------------

def post_schema(base_url, name, schema: dict, **extra) -> requests.Response:
    return requests.post(f"{base_url}/event-types/{name}/schemas",
                         json={"type": "json_schema", "schema": json.dumps(schema), **extra})


def test_posting_a_schema_evolves_it_like_a_put(base_url, created):
    name = created["name"]
    schema = copy.deepcopy(ORDER_SCHEMA)
    schema["properties"]["note"] = {"type": "string"}
    response = post_schema(base_url, name, schema, version="9.9.9")
    assert response.status_code == 200, response.text
    got = requests.get(f"{base_url}/event-types/{name}").json()
    assert got["schema"]["version"] == "1.1.0"
    assert got["schema"]["schema"] == json.dumps(schema)
    assert got["owning_application"] == created["owning_application"]
    versions = requests.get(f"{base_url}/event-types/{name}/schemas").json()["items"]
    assert [item["version"] for item in versions] == ["1.1.0", "1.0.0"]

    # The same schema again (even formatted otherwise) keeps the version.
    assert requests.post(f"{base_url}/event-types/{name}/schemas", json={
        "type": "json_schema", "schema": json.dumps(schema, indent=2)}).status_code == 200
    assert requests.get(f"{base_url}/event-types/{name}").json()["schema"] == got["schema"]


def test_posting_a_schema_refuses_what_a_put_refuses(base_url, created):
    name = created["name"]
    removed = copy.deepcopy(ORDER_SCHEMA)
    del removed["properties"]["amount"]
    problem = assert_problem(post_schema(base_url, name, removed), 422)
    assert "schema.schema" in problem["detail"] and "amount" in problem["detail"]

    problem = assert_problem(post_schema(base_url, name, {"type": "string"}), 422)
    assert "schema.schema" in problem["detail"]
    problem = assert_problem(requests.post(f"{base_url}/event-types/{name}/schemas",
                                           json={"type": "avro_schema"}), 422)
    assert "schema.type" in problem["detail"] and "schema.schema" in problem["detail"]
    assert_problem(requests.post(f"{base_url}/event-types/{name}/schemas", json=[]), 422)
    assert requests.get(f"{base_url}/event-types/{name}").json()["schema"]["version"] == "1.0.0"


def test_a_schema_over_a_megabyte_is_refused_on_creation_and_on_change(base_url, created):
    """The default NAKADI_MAX_SCHEMA_BYTES; the schema is not even parsed."""
    huge = {"type": "object", "properties": {f"p{i:06}": {} for i in range(90_000)}}
    assert len(json.dumps(huge)) > 1_000_000
    body = business_event_type(schema={"type": "json_schema", "schema": json.dumps(huge)})
    problem = assert_problem(requests.post(base_url + "/event-types", json=body), 422)
    assert "schema.schema: must be at most 1000000 bytes long" in problem["detail"]
    assert requests.get(f"{base_url}/event-types/{body['name']}").status_code == 404
    problem = assert_problem(post_schema(base_url, created["name"], huge), 422)
    assert "must be at most 1000000 bytes long" in problem["detail"]


def test_posting_a_schema_keeps_the_field_lists_true(base_url):
    body = business_event_type(partition_strategy="hash", partition_key_fields=["order_number"])
    assert requests.post(base_url + "/event-types", json=body).status_code == 201
    try:
        without_key = {"type": "object", "properties": {"amount": {"type": "number"}}}
        problem = assert_problem(post_schema(base_url, body["name"], without_key), 422)
        assert "partition_key_fields[0]" in problem["detail"]
    finally:
        requests.delete(f"{base_url}/event-types/{body['name']}")


def test_posting_a_schema_to_an_unknown_event_type_is_a_404(base_url):
    body = assert_problem(post_schema(base_url, "no.such-type", ORDER_SCHEMA), 404)
    assert "no.such-type" in body["detail"]


def at_once(count: int, send) -> list[requests.Response]:
    """``send(i)`` for i in 0..count-1 from as many threads, released together."""
    start = threading.Barrier(count)

    def released(i: int) -> requests.Response:
        start.wait()
        return send(i)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(released, range(count)))


def test_changes_made_at_once_are_applied_one_after_the_other(base_url, created):
    name = created["name"]
    noted = copy.deepcopy(ORDER_SCHEMA)
    noted["properties"]["note"] = {"type": "string"}
    same = at_once(8, lambda _: requests.put(
        f"{base_url}/event-types/{name}",
        json={**created, "schema": {"type": "json_schema", "schema": json.dumps(noted)}}))
    # Each PUT after the first finds the schema it asks for already there.
    assert [response.status_code for response in same] == [200] * 8
    versions = requests.get(f"{base_url}/event-types/{name}/schemas").json()["items"]
    assert [item["version"] for item in versions] == ["1.1.0", "1.0.0"]

    def with_property(i: int) -> dict:
        schema = copy.deepcopy(noted)
        schema["properties"][f"extra{i}"] = {"type": "string"}
        return schema

    rival = at_once(8, lambda i: post_schema(base_url, name, with_property(i)))
    # One wins; each other one is evolved from it, which would remove its property.
    assert sorted(response.status_code for response in rival) == [200] + [422] * 7
    winner = next(i for i, response in enumerate(rival) if response.status_code == 200)
    for response in rival:
        if response.status_code == 422:
            assert f"extra{winner}" in assert_problem(response, 422)["detail"]
    got = requests.get(f"{base_url}/event-types/{name}").json()["schema"]
    assert got["version"] == "1.2.0" and got["schema"] == json.dumps(with_property(winner))


def test_of_deletions_made_at_once_one_deletes_and_the_others_find_nothing(base_url, created):
    url = f"{base_url}/event-types/{created['name']}"
    answers = at_once(4, lambda _: requests.delete(url))
    assert sorted(answer.status_code for answer in answers) == [200, 404, 404, 404]
    for answer in answers:
        if answer.status_code == 404:
            assert created["name"] in assert_problem(answer, 404)["detail"]
