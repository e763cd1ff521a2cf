"""``/subscriptions`` and ``/subscriptions/{id}`` over HTTP against a real gunicorn."""

from __future__ import annotations

import json
import re
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from kazoo.client import KazooClient

from app.coordination.subscription_nodes import subscription_path
from app.repository.event_types import event_type_with_timeline
from app.storage.offsets import encode_offset
from tests.api.conftest import assert_problem

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}
AUTHORIZATION = {"admins": [{"data_type": "user", "value": "alice"}],
                 "readers": [{"data_type": "service", "value": "reader-service"}]}


def new_event_type(base_url: str, partitions: int = 1) -> str:
    name = f"subs.test-{uuid.uuid4().hex[:10]}"
    response = requests.post(base_url + "/event-types", json={
        "name": name, "owning_application": "producer", "category": "business",
        "enrichment_strategies": ["metadata_enrichment"], "partition_strategy": "user_defined",
        "schema": {"type": "json_schema", "schema": json.dumps(SCHEMA)},
        "default_statistic": {"messages_per_minute": 1, "message_size": 1,
                              "read_parallelism": partitions,
                              "write_parallelism": partitions}})
    assert response.status_code == 201, response.text
    return name


@pytest.fixture
def event_types(base_url):
    """Creates event types (with n partitions); deletes them afterwards."""
    created: list[str] = []

    def create(partitions: int = 1) -> str:
        created.append(new_event_type(base_url, partitions))
        return created[-1]

    yield create
    for name in created:
        requests.delete(f"{base_url}/event-types/{name}")


@pytest.fixture
def subscriptions(base_url, event_types):
    """POSTs subscription bodies; deletes every subscription created, before the
    event types they read."""
    ids: set[str] = set()

    def post(body, **kwargs) -> requests.Response:
        response = requests.post(base_url + "/subscriptions", json=body, **kwargs)
        if response.status_code in (200, 201):
            ids.add(response.json()["id"])
        return response

    yield post
    for subscription_id in ids:
        requests.delete(f"{base_url}/subscriptions/{subscription_id}")


def owner() -> str:
    return f"app-{uuid.uuid4().hex[:8]}"


def publish(base_url: str, name: str, partition: int, count: int) -> None:
    events = [{"n": n, "metadata": {"eid": str(uuid.uuid4()), "partition": str(partition),
                                    "occurred_at": "2026-11-22T10:00:00Z"}}
              for n in range(count)]
    response = requests.post(f"{base_url}/event-types/{name}/events", json=events)
    assert response.status_code == 200, response.text


# Creating


def test_create_answers_201_with_defaults_and_location(base_url, event_types, subscriptions):
    name = event_types()
    application = owner()
    response = subscriptions({"owning_application": application, "event_types": [name]})
    assert response.status_code == 201, response.text
    assert response.headers["Content-Type"] == "application/json"
    body = response.json()
    assert uuid.UUID(body["id"]) and body["id"] == body["id"].lower()
    assert response.headers["Location"] == f"/subscriptions/{body['id']}"
    assert response.headers["Content-Location"] == response.headers["Location"]
    assert {k: v for k, v in body.items() if k not in ("id", "created_at", "updated_at")} == {
        "owning_application": application, "event_types": [name], "consumer_group": "default",
        "read_from": "end", "initial_cursors": []}
    assert TIMESTAMP.match(body["created_at"]) and body["updated_at"] == body["created_at"]
    fetched = requests.get(base_url + response.headers["Location"])
    assert fetched.status_code == 200
    assert fetched.headers["Content-Type"] == "application/json"
    assert fetched.json() == body


def test_create_is_idempotent_on_the_key_with_event_types_as_a_set(
        base_url, event_types, subscriptions):
    first, second = event_types(), event_types()
    application = owner()
    created = subscriptions({"owning_application": application, "event_types": [first, second],
                             "consumer_group": "group", "read_from": "begin"})
    assert created.status_code == 201
    again = subscriptions({"owning_application": application, "event_types": [second, first],
                           "consumer_group": "group", "read_from": "end",
                           "id": "ignored", "created_at": "ignored", "unknown": [1, 2]})
    assert again.status_code == 200
    assert again.json() == created.json()  # the existing one, as it is
    assert again.headers["Location"] == f"/subscriptions/{created.json()['id']}"
    assert "Content-Location" not in again.headers
    other_group = subscriptions({"owning_application": application,
                                 "event_types": [first, second], "consumer_group": "other"})
    assert other_group.status_code == 201
    assert other_group.json()["id"] != created.json()["id"]
    assert created.json()["event_types"] == sorted([first, second])


def test_concurrent_creates_of_one_key_make_one_subscription(
        base_url, event_types, subscriptions):
    body = {"owning_application": owner(), "event_types": [event_types(), event_types()]}
    with ThreadPoolExecutor(8) as executor:
        responses = list(executor.map(lambda _: subscriptions(body), range(8)))
    assert sorted(r.status_code for r in responses) == [200] * 7 + [201]
    assert len({r.json()["id"] for r in responses}) == 1
    listed = requests.get(base_url + "/subscriptions",
                          params={"owning_application": body["owning_application"]})
    assert len(listed.json()["items"]) == 1


def test_authorization_is_stored_and_echoed(base_url, event_types, subscriptions):
    sent = {"admins": [{"data_type": "user", "value": "alice", "extra": 1}],
            "readers": [{"data_type": "*", "value": "*"}], "writers": "ignored"}
    response = subscriptions({"owning_application": owner(), "event_types": [event_types()],
                              "authorization": sent})
    assert response.status_code == 201
    expected = {"admins": [{"data_type": "user", "value": "alice"}],
                "readers": [{"data_type": "*", "value": "*"}]}
    assert response.json()["authorization"] == expected
    assert requests.get(base_url + response.headers["Location"]).json()["authorization"] == (
        expected)


@pytest.mark.parametrize("body, names", [
    ({"event_types": ["x"]}, "owning_application: is required"),
    ({"owning_application": "a"}, "event_types: is required"),
    ({"owning_application": "a", "event_types": []}, "event_types: must name at least one"),
    ({"owning_application": "", "event_types": ["x"]}, "owning_application: must not be empty"),
    ({"owning_application": 5, "event_types": ["x"]}, "owning_application: must be a string"),
    ({"owning_application": "a", "event_types": "x"}, "event_types: must be an array"),
    ({"owning_application": "a", "event_types": [1]}, "event_types[0]: must be a string"),
    ({"owning_application": "a", "event_types": ["x", "x"]}, "'x' more than once"),
    ({"owning_application": "a", "event_types": ["x"], "consumer_group": ["g"]},
     "consumer_group: must be a string"),
    ({"owning_application": "a", "event_types": ["x"], "read_from": "middle"},
     "read_from: must be one of begin, end, cursors"),
    ({"owning_application": "a", "event_types": ["x"], "read_from": 1}, "read_from:"),
    ({"owning_application": "a", "event_types": ["x"], "initial_cursors": {}},
     "initial_cursors: must be an array"),
    ({"owning_application": "a", "event_types": ["x"], "initial_cursors": [[]]},
     "initial_cursors[0]: must be an object"),
    ({"owning_application": "a", "event_types": ["x"],
      "initial_cursors": [{"event_type": "x", "partition": 0, "offset": "begin"}]},
     "initial_cursors[0]:"),
    ({"owning_application": "a", "event_types": ["x"], "authorization": []},
     "authorization: must be an object"),
    ({"owning_application": "a", "event_types": ["x"], "authorization": {"admins": []}},
     "authorization.admins: must be a non-empty array"),
    ({"owning_application": "a", "event_types": ["x"],
      "authorization": {**AUTHORIZATION, "readers": [{"data_type": "user"}]}},
     "authorization.readers[0].value: must be a string"),
    ({"owning_application": "a", "event_types": ["x"],
      "authorization": {**AUTHORIZATION, "admins": [{"data_type": "", "value": "v"}]}},
     "authorization.admins[0].data_type: must not be empty"),
    (["not", "an", "object"], "the body must be a JSON object"),
])
def test_bad_bodies_are_422s_naming_the_field(base_url, subscriptions, body, names):
    assert names in assert_problem(subscriptions(body), 422)["detail"]


def test_every_wrong_field_is_named(base_url, subscriptions):
    detail = assert_problem(subscriptions({"owning_application": 1, "event_types": 2,
                                           "read_from": 3}), 422)["detail"]
    assert "owning_application:" in detail and "event_types:" in detail
    assert "read_from:" in detail


def test_missing_event_types_are_named(base_url, event_types, subscriptions):
    existing = event_types()
    detail = assert_problem(subscriptions({"owning_application": "a",
                                           "event_types": [existing, "no.such", "nor.this"]}),
                            422)["detail"]
    assert "'no.such', 'nor.this' do not exist" in detail and existing not in detail


def test_partitions_beyond_the_maximum_are_refused(base_url, event_types, subscriptions):
    wide = [event_types(partitions=51), event_types(partitions=50)]
    assert subscriptions({"owning_application": owner(), "event_types": wide[1:]}
                         ).status_code == 201
    detail = assert_problem(subscriptions({"owning_application": "a", "event_types": wide}),
                            422)["detail"]
    assert "101 partitions" in detail and "at most 100" in detail
    many = [f"et.{n}" for n in range(101)]
    assert "at most 100" in assert_problem(
        subscriptions({"owning_application": "a", "event_types": many}), 422)["detail"]


def test_bodies_that_are_not_json_objects_of_json(base_url):
    url = base_url + "/subscriptions"
    assert_problem(requests.post(url, data="{not json", headers={
        "Content-Type": "application/json"}), 400)
    assert_problem(requests.post(url, data='{"owning_application": NaN}', headers={
        "Content-Type": "application/json"}), 400)
    assert_problem(requests.post(url, data="[" * 100_000, headers={
        "Content-Type": "application/json"}), 400)
    assert_problem(requests.post(url, data='{"owning_application": "a"}', headers={
        "Content-Type": "text/plain"}), 415)
    assert_problem(requests.post(url), 415)


@pytest.mark.parametrize("field, value", [
    ("owning_application", "a\x00b"),
    ("owning_application", "x" * 1_000_000),
    ("consumer_group", "\x00"),
    ("event_types", ["a\x00b"]),
    ("event_types", ["y" * 300]),
    ("authorization", {"admins": [{"data_type": "u", "value": "\x00"}],
                       "readers": [{"data_type": "u", "value": "v"}]}),
    ("initial_cursors", [{"event_type": "\x00", "partition": "0", "offset": "begin"}]),
    ("initial_cursors", [{"event_type": "x", "partition": "0" * 10_000, "offset": "begin"}]),
    ("read_from", {"nested": [[[{"deep": None}]]]}),
    ("event_types", [[[["x"]]]]),
])
def test_hostile_values_are_422s(base_url, event_types, subscriptions, field, value):
    body = {"owning_application": "a", "event_types": [event_types()], "read_from": "cursors",
            field: value}
    assert field in assert_problem(subscriptions(body), 422)["detail"]


def test_unpaired_surrogates_are_422s(base_url):
    raw = '{"owning_application": "a\\ud800", "event_types": ["x"]}'
    response = requests.post(base_url + "/subscriptions", data=raw,
                             headers={"Content-Type": "application/json"})
    assert "surrogates" in assert_problem(response, 422)["detail"]


# Initial cursors, on each storage engine


@pytest.fixture
def two_partitions(base_url, default_storage, event_types):
    """An event type with 2 partitions on the default storage: 3 events in
    partition 0, none in partition 1."""
    name = event_types(partitions=2)
    publish(base_url, name, 0, 3)
    return name


def cursor(event_type: str, partition: str, offset: str) -> dict:
    return {"event_type": event_type, "partition": partition, "offset": offset}


def test_initial_cursors_are_checked_and_stored(base_url, two_partitions, subscriptions):
    name = two_partitions
    cursors = [cursor(name, "1", "BEGIN"), cursor(name, "0", encode_offset(1, 1))]
    response = subscriptions({"owning_application": owner(), "event_types": [name],
                              "read_from": "cursors", "initial_cursors": cursors})
    assert response.status_code == 201, response.text
    assert response.json()["read_from"] == "cursors"
    assert response.json()["initial_cursors"] == [
        cursor(name, "1", "begin"), cursor(name, "0", encode_offset(1, 1))]


def test_initial_cursors_may_point_at_the_newest_event(base_url, two_partitions,
                                                       subscriptions):
    name = two_partitions
    response = subscriptions({"owning_application": owner(), "event_types": [name],
                              "read_from": "cursors", "initial_cursors": [
                                  cursor(name, "0", encode_offset(1, 2)),
                                  cursor(name, "1", encode_offset(1, -1))]})
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("cursors, names", [
    (None, "initial_cursors: required when read_from is 'cursors'"),
    ([], "initial_cursors: required"),
    ([("0", "begin")], "no cursor for '{name}' partition '1'"),
    ([("0", "begin"), ("1", "begin"), ("0", "begin")], "initial_cursors[2]: partition '0'"),
    ([("0", "begin"), ("2", "begin")], "initial_cursors[1]: partition '2' does not exist"),
    ([("0", "begin"), ("01", "begin")], "initial_cursors[1]: partition '01' does not exist"),
    ([("0", "999"), ("1", "begin")], "initial_cursors[0] of '{name}'"),
    ([("0", encode_offset(1, 3)), ("1", "begin")], "the offset does not exist"),
    ([("0", "begin"), ("1", encode_offset(1, 0))], "the offset does not exist"),
    ([("0", encode_offset(2, 0)), ("1", "begin")], "timeline 2"),
])
def test_bad_initial_cursors_are_422s_naming_the_cursor(base_url, two_partitions,
                                                        subscriptions, cursors, names):
    name = two_partitions
    body = {"owning_application": "a", "event_types": [name], "read_from": "cursors"}
    if cursors is not None:
        body["initial_cursors"] = [cursor(name, p, o) for p, o in cursors]
    detail = assert_problem(subscriptions(body), 422)["detail"]
    assert names.format(name=name) in detail


def test_a_cursor_of_another_event_type_is_refused(base_url, two_partitions, subscriptions):
    name = two_partitions
    detail = assert_problem(subscriptions({
        "owning_application": "a", "event_types": [name], "read_from": "cursors",
        "initial_cursors": [cursor(name, "0", "begin"), cursor(name, "1", "begin"),
                            cursor("other", "0", "begin")]}), 422)["detail"]
    assert "initial_cursors[2]: event type 'other' is not one of" in detail


def test_initial_cursors_are_ignored_unless_reading_from_cursors(base_url, event_types,
                                                                 subscriptions):
    name = event_types()
    response = subscriptions({"owning_application": owner(), "event_types": [name],
                              "read_from": "begin",
                              "initial_cursors": [cursor(name, "7", "begin")]})
    assert response.status_code == 201
    assert response.json()["initial_cursors"] == []


# Listing


def test_listing_filters_and_pages_newest_first(base_url, event_types, subscriptions):
    a, b = event_types(), event_types()
    application = owner()
    ids = []
    for group, types in (("1", [a]), ("2", [a, b]), ("3", [b]), ("4", [b, a])):
        response = subscriptions({"owning_application": application, "event_types": types,
                                  "consumer_group": group})
        assert response.status_code == 201
        ids.append(response.json()["id"])
    subscriptions({"owning_application": owner(), "event_types": [a]})

    def listed(**params) -> dict:
        response = requests.get(base_url + "/subscriptions", params=params)
        assert response.status_code == 200, response.text
        assert response.headers["Content-Type"] == "application/json"
        return response.json()

    mine = listed(owning_application=application)
    assert [item["id"] for item in mine["items"]] == ids[::-1]
    assert mine["_links"] == {}
    assert [i["id"] for i in listed(owning_application=application, event_type=[a, b])[
        "items"]] == [ids[3], ids[1]]
    assert len(listed(event_type=[a])["items"]) == 4
    assert listed(owning_application=application, event_type="no.such") == {
        "_links": {}, "items": []}

    page = listed(owning_application=application, event_type=b, limit=2, offset=1,
                  show_status="true")
    assert [item["id"] for item in page["items"]] == [ids[2], ids[1]]
    query = f"owning_application={application}&event_type={b}&show_status=true"
    assert page["_links"] == {
        "prev": {"href": f"/subscriptions?{query}&offset=0&limit=2"}}
    first = listed(owning_application=application, limit=3)
    assert first["_links"] == {"next": {"href": f"/subscriptions?owning_application="
                                                f"{application}&offset=3&limit=3"}}
    follow = requests.get(base_url + first["_links"]["next"]["href"]).json()
    assert [item["id"] for item in follow["items"]] == [ids[0]]
    assert follow["_links"] == {"prev": {"href": f"/subscriptions?owning_application="
                                                 f"{application}&offset=0&limit=3"}}


@pytest.mark.parametrize("params", [
    {"limit": "0"}, {"limit": "1001"}, {"limit": "x"}, {"offset": "-1"},
    {"offset": "1" * 30}, {"show_status": "maybe"}, {"event_type": "a\x00"},
    {"owning_application": "\x00"},
])
def test_bad_listing_parameters_are_400s(base_url, params):
    assert_problem(requests.get(base_url + "/subscriptions", params=params), 400)


# Reading one


@pytest.mark.parametrize("subscription_id", [
    str(uuid.uuid4()), "not-a-uuid", "' OR 1=1 --", "x" * 3000, "%00", "0" * 32,
    "{" + str(uuid.uuid4()) + "}",
])
def test_unknown_or_malformed_ids_are_404s(base_url, subscription_id):
    url = f"{base_url}/subscriptions/{subscription_id}"
    assert_problem(requests.get(url), 404)
    assert_problem(requests.delete(url), 404)
    assert_problem(requests.put(url, json={"authorization": AUTHORIZATION}), 404)


# Changing


@pytest.fixture
def subscription(base_url, event_types, subscriptions) -> dict:
    response = subscriptions({"owning_application": owner(),
                              "event_types": [event_types(), event_types()],
                              "consumer_group": "group", "authorization": AUTHORIZATION})
    assert response.status_code == 201
    return response.json()


def put(base_url, subscription_id: str, body, **kwargs) -> requests.Response:
    return requests.put(f"{base_url}/subscriptions/{subscription_id}", json=body, **kwargs)


def test_put_changes_the_authorization_and_moves_updated_at(base_url, pool, subscription):
    changed = {"admins": [{"data_type": "user", "value": "bob"}],
               "readers": [{"data_type": "*", "value": "*"}]}
    response = put(base_url, subscription["id"],
                   {**subscription, "authorization": changed,
                    "event_types": subscription["event_types"][::-1],
                    "created_at": "2000-01-01T00:00:00Z", "status": [], "unknown": 1})
    assert response.status_code == 204, response.text
    assert response.content == b""
    stored = requests.get(f"{base_url}/subscriptions/{subscription['id']}").json()
    assert stored["authorization"] == changed
    assert stored["updated_at"] >= subscription["updated_at"]  # milliseconds may be equal
    assert pool.fetch_all("SELECT updated_at > created_at FROM subscriptions WHERE id = %s",
                          (subscription["id"],)) == [(True,)]
    assert stored["created_at"] == subscription["created_at"]
    assert {k: v for k, v in stored.items() if k not in ("authorization", "updated_at")} == {
        k: v for k, v in subscription.items() if k not in ("authorization", "updated_at")}


def test_put_without_changes_keeps_updated_at(base_url, subscription):
    url = f"{base_url}/subscriptions/{subscription['id']}"
    assert put(base_url, subscription["id"], subscription).status_code == 204
    assert put(base_url, subscription["id"], {}).status_code == 204
    assert requests.get(url).json() == subscription


@pytest.mark.parametrize("change, names", [
    ({"owning_application": "someone-else"}, ["owning_application"]),
    ({"consumer_group": "other", "read_from": "begin"}, ["consumer_group", "read_from"]),
    ({"event_types": ["other"]}, ["event_types"]),
    ({"read_from": "cursors", "initial_cursors": [{"event_type": "x", "partition": "0",
                                                   "offset": "begin"}]},
     ["read_from", "initial_cursors"]),
])
def test_put_of_other_fields_is_a_422_naming_them(base_url, subscription, change, names):
    detail = assert_problem(put(base_url, subscription["id"], {**subscription, **change}),
                            422)["detail"]
    for name in names:
        assert f"{name}: cannot be changed" in detail
    url = f"{base_url}/subscriptions/{subscription['id']}"
    assert requests.get(url).json() == subscription


def test_bad_put_bodies(base_url, subscription):
    url = f"{base_url}/subscriptions/{subscription['id']}"
    assert "authorization.admins" in assert_problem(
        put(base_url, subscription["id"], {"authorization": {"readers": []}}), 422)["detail"]
    assert_problem(put(base_url, subscription["id"], [1]), 422)
    assert_problem(requests.put(url, data="{", headers={"Content-Type": "application/json"}),
                   400)
    assert_problem(requests.put(url, data="{}", headers={"Content-Type": "text/plain"}), 415)


# Deleting


def test_delete_removes_the_subscription_and_its_zookeeper_state(
        base_url, stack_env, event_types, subscriptions):
    body = {"owning_application": owner(), "event_types": [event_types()]}
    subscription_id = subscriptions(body).json()["id"]
    zookeeper = KazooClient(hosts=stack_env["NAKADI_ZOOKEEPER"]
                            + stack_env["NAKADI_ZOOKEEPER_ROOT"])
    zookeeper.start(timeout=10)
    try:
        zookeeper.ensure_path(subscription_path(subscription_id) + "/sessions/s1")
        url = f"{base_url}/subscriptions/{subscription_id}"
        response = requests.delete(url)
        assert response.status_code == 204
        assert response.content == b""
        assert zookeeper.exists(subscription_path(subscription_id)) is None
    finally:
        zookeeper.stop()
        zookeeper.close()
    assert_problem(requests.get(url), 404)
    assert_problem(requests.delete(url), 404)
    again = subscriptions(body)
    assert again.status_code == 201 and again.json()["id"] != subscription_id


def test_an_event_type_read_by_subscriptions_cannot_be_deleted(
        base_url, pool, event_types, subscriptions):
    name = event_types()
    subscription_id = subscriptions({"owning_application": owner(),
                                     "event_types": [name]}).json()["id"]
    detail = assert_problem(requests.delete(f"{base_url}/event-types/{name}"), 422)["detail"]
    assert subscription_id in detail
    assert event_type_with_timeline(pool, name) is not None
    assert requests.delete(f"{base_url}/subscriptions/{subscription_id}").status_code == 204
    assert requests.delete(f"{base_url}/event-types/{name}").status_code == 200
