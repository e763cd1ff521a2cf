"""Publishing over HTTP, on each storage engine."""

from __future__ import annotations

import gzip
import json

import pytest
import requests

from app.publishing.batch import MAX_EVENT_BYTES
from app.repository.event_types import event_type_with_timelines
from tests.api.conftest import assert_problem
from tests.helpers.broker import business_event, new_event_type, post
from tests.helpers.storage import all_stored, stored


@pytest.fixture
def event_types(base_url, default_storage):
    """Creates event types on the default storage; deletes them afterwards."""
    created = []

    def create(**overrides) -> str:
        created.append(new_event_type(base_url, **overrides))
        return created[-1]

    yield create
    for name in created:
        requests.delete(f"{base_url}/event-types/{name}")


def test_published_events_are_stored_with_enrichment(base_url, pool, event_types):
    name = event_types()
    sent = [business_event(n) for n in range(3)]
    response = post(base_url, name, sent, headers={"X-Flow-Id": "flow-publish-1"})
    assert response.status_code == 200, response.text
    assert response.content == b""
    assert "Content-Type" not in response.headers  # an empty body claims no type
    # ...and says its length, as Nakadi's does, rather than coming as chunks.
    assert response.headers["Content-Length"] == "0"
    assert "Transfer-Encoding" not in response.headers
    by_eid = {e["metadata"]["eid"]: (p, e) for p, es in stored(pool, name).items() for e in es}
    assert len(by_eid) == 3
    for event in sent:
        partition, got = by_eid[event["metadata"]["eid"]]
        metadata = got.pop("metadata")
        assert got == {k: v for k, v in event.items() if k != "metadata"}
        assert metadata.pop("received_at").endswith("Z")
        assert metadata == {**event["metadata"], "event_type": name, "version": "1.0.0",
                            "flow_id": "flow-publish-1", "partition": str(partition)}


def test_events_keep_their_order_within_a_partition(base_url, pool, event_types):
    name = event_types(partition_strategy="hash", partition_key_fields=["order_number"])
    sent = [business_event(n, order_number=f"K{n % 3}") for n in range(30)]
    assert post(base_url, name, sent).status_code == 200
    for events in stored(pool, name).values():
        amounts = [e["amount"] for e in events]
        assert amounts == sorted(amounts)


def test_hash_sends_a_key_always_to_one_partition_and_keys_spread(base_url, pool,
                                                                  event_types):
    name = event_types(partition_strategy="hash", partition_key_fields=["order_number"])
    for round_ in range(2):
        batch = [business_event(round_, order_number=f"K{k}") for k in range(40)]
        assert post(base_url, name, batch).status_code == 200
    partitions_of_key: dict[str, set[str]] = {}
    for event in all_stored(pool, name):
        partitions_of_key.setdefault(event["order_number"], set()).add(
            event["metadata"]["partition"])
    assert all(len(parts) == 1 for parts in partitions_of_key.values())
    assert len({next(iter(parts)) for parts in partitions_of_key.values()}) == 4


def test_user_defined_partition_is_used_and_checked(base_url, pool, event_types):
    name = event_types(partition_strategy="user_defined")
    event = business_event(1)
    event["metadata"]["partition"] = "2"
    assert post(base_url, name, [event]).status_code == 200
    assert [len(events) for _, events in sorted(stored(pool, name).items())] == [0, 0, 1, 0]

    missing, unknown = business_event(2), business_event(3)
    unknown["metadata"]["partition"] = "4"
    response = post(base_url, name, [missing, unknown])
    assert response.status_code == 422
    items = response.json()
    assert [(i["publishing_status"], i["step"]) for i in items] == [
        ("failed", "partitioning"), ("failed", "partitioning")]
    assert "metadata.partition is required" in items[0]["detail"]
    assert "'4' is not a partition" in items[1]["detail"]


def test_invalid_event_rejects_the_batch_with_exact_items(base_url, pool, event_types):
    name = event_types()
    good, bad, also_good = business_event(1), business_event(2), business_event(3)
    del bad["order_number"]
    bad["amount"] = "lots"
    response = post(base_url, name, [good, bad, also_good])
    assert response.status_code == 422
    assert response.headers["Content-Type"] == "application/json"
    items = response.json()
    aborted = "not published: another event of the batch failed at validating"
    assert items[0] == {"eid": good["metadata"]["eid"], "publishing_status": "aborted",
                        "step": "validating", "detail": aborted}
    assert items[2] == {"eid": also_good["metadata"]["eid"], "publishing_status": "aborted",
                        "step": "validating", "detail": aborted}
    assert items[1]["eid"] == bad["metadata"]["eid"]
    assert (items[1]["publishing_status"], items[1]["step"]) == ("failed", "validating")
    assert items[1]["detail"].startswith("#")
    assert "order_number" in items[1]["detail"] or "amount" in items[1]["detail"]
    assert all_stored(pool, name) == []


def test_none_mode_refuses_undeclared_properties_naming_them(base_url, pool, event_types):
    name = event_types(compatibility_mode="none")
    response = post(base_url, name, [business_event(0), business_event(1, surprise=True)])
    assert response.status_code == 422
    items = response.json()
    assert [item["publishing_status"] for item in items] == ["aborted", "failed"]
    assert items[1]["detail"] == ("#: Additional properties are not allowed "
                                  "('surprise' was unexpected)")
    assert all_stored(pool, name) == []


def test_patterns_and_uuids_are_read_as_python_reads_them(base_url, pool, event_types):
    """Valid batches first pass a native check that reads `\\w` as ASCII and `$` as the very
    end; events it refuses are checked again, so what Python's regexes accept is stored."""
    schema = {"properties": {"order_number": {"type": "string", "pattern": r"^\w+$"},
                             "ref": {"type": "string", "format": "uuid"}}}
    name = event_types(schema={"type": "json_schema", "schema": json.dumps(schema)})
    sent = [business_event(0, order_number="Jose"), business_event(1, order_number="José"),
            business_event(2, order_number="Jose\n", ref="D765DE34-09C0-4BBB-8B1E-7160A33A0791")]
    assert post(base_url, name, sent).status_code == 200
    assert sorted(e["order_number"] for e in all_stored(pool, name)) == ["Jose", "Jose\n", "José"]
    braced = "{d765de34-09c0-4bbb-8b1e-7160a33a0791}"
    response = post(base_url, name, [business_event(3, order_number="José"),
                                     business_event(4, ref=braced)])
    assert response.status_code == 422
    assert [item["publishing_status"] for item in response.json()] == ["aborted", "failed"]
    assert response.json()[1]["detail"] == f"#/ref: '{braced}' is not a 'uuid'"


@pytest.mark.parametrize(("metadata", "detail"), [
    ({"eid": "not-a-uuid"}, "uuid"),
    ({"occurred_at": "yesterday"}, "date-time"),
])
def test_metadata_is_validated(base_url, event_types, metadata, detail):
    name = event_types()
    event = business_event(1)
    event["metadata"].update(metadata)
    items = post(base_url, name, [event]).json()
    assert items[0]["publishing_status"] == "failed"
    assert detail in items[0]["detail"]


def test_enrichment_refuses_producer_set_fields(base_url, pool, event_types):
    name = event_types()
    received = business_event(1)
    received["metadata"]["received_at"] = "2026-11-22T10:00:00Z"
    fine = business_event(2)
    response = post(base_url, name, [fine, received])
    assert response.status_code == 422
    items = response.json()
    assert items[0] == {"eid": fine["metadata"]["eid"], "publishing_status": "aborted",
                        "step": "enriching",
                        "detail": "not published: another event of the batch failed at enriching"}
    assert (items[1]["publishing_status"], items[1]["step"]) == ("failed", "enriching")
    assert "received_at" in items[1]["detail"]
    assert all_stored(pool, name) == []

    wrong_type = business_event(3)
    wrong_type["metadata"]["event_type"] = "some.other-type"
    items = post(base_url, name, [wrong_type]).json()
    assert items[0]["publishing_status"] == "failed"
    assert "event_type" in items[0]["detail"]


def test_undefined_events_are_validated_and_stored_unenriched(base_url, pool, event_types):
    name = event_types(category="undefined", enrichment_strategies=[],
                       schema={"type": "json_schema",
                               "schema": json.dumps({"properties": {"x": {"type": "integer"}}})})
    assert post(base_url, name, [{"x": 1, "metadata": {"anything": True}}]).status_code == 200
    assert all_stored(pool, name) == [{"x": 1, "metadata": {"anything": True}}]
    items = post(base_url, name, [{"x": "one"}]).json()
    assert (items[0]["publishing_status"], items[0]["step"]) == ("failed", "validating")
    assert "eid" not in items[0]


def test_empty_batch_writes_nothing(base_url, pool, event_types):
    name = event_types()
    assert post(base_url, name, []).status_code == 200
    assert all_stored(pool, name) == []


def test_gzip_bodies_are_accepted(base_url, pool, event_types):
    name = event_types()
    body = gzip.compress(json.dumps([business_event(n) for n in range(5)]).encode())
    response = requests.post(f"{base_url}/event-types/{name}/events", data=body, headers={
        "Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert response.status_code == 200, response.text
    assert len(all_stored(pool, name)) == 5
    broken = requests.post(f"{base_url}/event-types/{name}/events", data=b"not gzip",
                           headers={"Content-Type": "application/json",
                                    "Content-Encoding": "gzip"})
    assert "gzip" in assert_problem(broken, 400)["detail"]


def sized_event(size: int) -> str:
    """An undefined-category event whose JSON text is exactly ``size`` bytes."""
    text = '{"pad": ""}'
    return text[:-2] + "x" * (size - len(text)) + text[-2:]


def test_event_size_limit_is_999000_bytes_as_sent(base_url, pool, event_types):
    name = event_types(category="undefined", enrichment_strategies=[],
                       schema={"type": "json_schema", "schema": "{}"})
    headers = {"Content-Type": "application/json"}
    url = f"{base_url}/event-types/{name}/events"
    at_limit = f"[{sized_event(MAX_EVENT_BYTES)}, {{}}]"
    assert requests.post(url, data=at_limit, headers=headers).status_code == 200
    over = f"[{{}}, {sized_event(MAX_EVENT_BYTES + 1)}]"
    response = requests.post(url, data=over, headers=headers)
    assert response.status_code == 422
    items = response.json()
    assert items[0] == {"publishing_status": "aborted", "step": "validating",
                        "detail": "not published: another event of the batch failed at validating"}
    assert items[1]["publishing_status"] == "failed"
    assert "999001 bytes" in items[1]["detail"]
    assert len(all_stored(pool, name)) == 2


# The failure is injected with a PostgreSQL trigger, so this runs on that engine only.
@pytest.mark.parametrize("default_storage", ["postgres"], indirect=True)
def test_storage_failure_is_a_207_with_failed_items(base_url, pool, event_types):
    name = event_types()
    topic = event_type_with_timelines(pool, name)[1].active.topic
    topic_id = pool.fetch_all("SELECT id FROM log_topics WHERE name = %s", (topic,))[0][0]
    pool.execute(
        "CREATE FUNCTION refuse_append() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'disk on fire'; END $$;"
        "CREATE TRIGGER refuse_append BEFORE INSERT ON log_chunks FOR EACH ROW"
        f" WHEN (NEW.topic_id = {int(topic_id)}) EXECUTE FUNCTION refuse_append()")
    try:
        sent = [business_event(n) for n in range(3)]
        response = post(base_url, name, sent)
    finally:
        pool.execute("DROP TRIGGER refuse_append ON log_chunks; DROP FUNCTION refuse_append()")
    assert response.status_code == 207
    items = response.json()
    assert [(i["eid"], i["publishing_status"], i["step"]) for i in items] == [
        (e["metadata"]["eid"], "failed", "publishing") for e in sent]
    assert all("disk on fire" in i["detail"] for i in items)
    assert post(base_url, name, sent).status_code == 200


@pytest.mark.parametrize(("data", "content_type", "status"), [
    ("{broken", "application/json", 400),
    ('{"not": "an array"}', "application/json", 422),
    ("[]", "text/plain", 415),
])
def test_malformed_batches_are_problems(base_url, data, content_type, status, event_types):
    name = event_types()
    response = requests.post(f"{base_url}/event-types/{name}/events", data=data,
                             headers={"Content-Type": content_type})
    assert_problem(response, status)


def test_unknown_event_type_is_a_404(base_url):
    assert_problem(post(base_url, "no.such-type", [business_event()]), 404)


ROOT_REF_SCHEMA = {
    "$ref": "#/definitions/O",
    "definitions": {"O": {"type": "object", "properties": {"order_number": {"type": "string"}}}},
}
BASE_AND_EXTENSION = {
    "definitions": {"Base": {"type": "object", "properties": {"id": {"type": "string"}},
                             "required": ["id"]}},
    "allOf": [{"$ref": "#/definitions/Base"}, {"properties": {"extra": {"type": "integer"}}}],
}
TWO_BRANCHES = {"allOf": [{"properties": {"a": {"type": "string"}}},
                          {"properties": {"b": {"type": "string"}}}]}


def assert_refused_at_validating(response, detail_part):
    assert response.status_code == 422, response.text
    [item] = response.json()
    assert (item["publishing_status"], item["step"]) == ("failed", "validating")
    assert detail_part in item["detail"], item["detail"]


def schema_body(document):
    return {"type": "json_schema", "schema": json.dumps(document)}


def metadata():
    return business_event()["metadata"]


@pytest.mark.parametrize("default_storage", ["postgres"], indirect=True)
@pytest.mark.parametrize("mode", ["forward", "compatible", "none"])
def test_a_business_schema_whose_root_is_a_reference(base_url, pool, event_types, mode):
    """Its metadata is validated and required (was a 500 or stored unchecked), and in strict
    modes metadata is not taken for an undeclared property (every event was refused)."""
    name = event_types(schema=schema_body(ROOT_REF_SCHEMA), compatibility_mode=mode)
    assert_refused_at_validating(post(base_url, name, [{"order_number": "x"}]),
                                 "'metadata' is a required property")
    bad_eid = {"order_number": "x", "metadata": {**metadata(), "eid": "nope"}}
    assert_refused_at_validating(post(base_url, name, [bad_eid]), "'nope' is not a 'uuid'")
    response = post(base_url, name, [{"order_number": "x", "metadata": metadata()}])
    assert response.status_code == 200, response.text
    surprise = post(base_url, name, [{"order_number": "y", "metadata": metadata(), "z": 1}])
    if mode == "forward":
        assert surprise.status_code == 200, surprise.text
    else:
        assert_refused_at_validating(surprise, "('z' was unexpected)")
    assert len(all_stored(pool, name)) == (2 if mode == "forward" else 1)


@pytest.mark.parametrize("default_storage", ["postgres"], indirect=True)
@pytest.mark.parametrize("mode", ["forward", "compatible"])
def test_a_data_schema_whose_root_is_a_reference(base_url, pool, event_types, mode):
    """Its references resolve against itself (every publish was a 500)."""
    name = event_types(category="data", schema=schema_body(ROOT_REF_SCHEMA),
                       partition_strategy="random", compatibility_mode=mode)
    event = {"data_op": "C", "data_type": "order", "data": {"order_number": "1"},
             "metadata": metadata()}
    assert post(base_url, name, [event]).status_code == 200
    bad = {**event, "data": {"order_number": 1}, "metadata": metadata()}
    assert_refused_at_validating(post(base_url, name, [bad]), "1 is not of type 'string'")
    assert len(all_stored(pool, name)) == 1


@pytest.mark.parametrize("default_storage", ["postgres"], indirect=True)
@pytest.mark.parametrize("mode", ["compatible", "none"])
def test_strict_modes_accept_properties_declared_through_composition(base_url, pool,
                                                                     event_types, mode):
    undefined = event_types(category="undefined", enrichment_strategies=[],
                            schema=schema_body(TWO_BRANCHES), compatibility_mode=mode)
    assert post(base_url, undefined, [{"a": "x", "b": "y"}]).status_code == 200
    assert_refused_at_validating(post(base_url, undefined, [{"a": "x", "c": "y"}]),
                                 "('c' was unexpected)")
    business = event_types(schema=schema_body(BASE_AND_EXTENSION), compatibility_mode=mode)
    good = {"id": "1", "extra": 2, "metadata": metadata()}
    assert post(base_url, business, [good]).status_code == 200
    assert_refused_at_validating(post(base_url, business, [{**good, "extra": "2"}]),
                                 "'2' is not of type 'integer'")
    assert_refused_at_validating(post(base_url, business, [{**good, "surprise": 1}]),
                                 "('surprise' was unexpected)")
    assert len(all_stored(pool, undefined)) == len(all_stored(pool, business)) == 1


def test_a_schema_that_cannot_validate_events_is_refused_at_creation(base_url):
    """Draft 4 ignores what is beside a root $ref: a reference into it would make every
    publish fail, so the event type is not created."""
    document = {"$ref": "#/properties/o", "properties": {"o": {"type": "object"}}}
    body = {"name": "pub.unusable-schema", "owning_application": "order-service",
            "category": "business", "enrichment_strategies": ["metadata_enrichment"],
            "schema": schema_body(document)}
    response = requests.post(f"{base_url}/event-types", json=body)
    problem = assert_problem(response, 422)
    assert "'#/properties/o' does not resolve" in problem["detail"]
