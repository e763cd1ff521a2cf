"""``POST /subscriptions`` over HTTP against a real gunicorn: the rules of creating one."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from app.storage.offsets import encode_offset
from tests.api.conftest import assert_problem
from tests.api.subscriptions.conftest import AUTHORIZATION, TIMESTAMP, owner, publish


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
    # A set, as Nakadi reads it: a name given twice is given once (it was a 422).
    twice = subscriptions({"owning_application": application,
                           "event_types": [first, second, first], "consumer_group": "group"})
    assert twice.status_code == 200 and twice.json() == created.json()


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
    ({"owning_application": "a", "event_types": ["x"], "authorization": {
        **AUTHORIZATION, "readers": [{"data_type": "user", "value": str(n)} for n in range(1001)]}},
     "authorization.readers: must list at most 1000 attributes (got 1001)"),
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
    ("owning_application", "x" * 1_000_000),
    ("event_types", ["y" * 300]),
    ("initial_cursors", [{"event_type": "x", "partition": "0" * 10_000, "offset": "begin"}]),
    ("read_from", {"nested": [[[{"deep": None}]]]}),
    ("event_types", [[[["x"]]]]),
])
def test_hostile_values_are_422s(base_url, event_types, subscriptions, field, value):
    body = {"owning_application": "a", "event_types": [event_types()], "read_from": "cursors",
            field: value}
    assert field in assert_problem(subscriptions(body), 422)["detail"]


@pytest.mark.parametrize("field, value", [
    ("owning_application", "a\x00b"),
    ("consumer_group", "\x00"),
    ("event_types", ["a\x00b"]),
    ("authorization", {"admins": [{"data_type": "u", "value": "\x00"}],
                       "readers": [{"data_type": "u", "value": "v"}]}),
    ("initial_cursors", [{"event_type": "\x00", "partition": "0", "offset": "begin"}]),
])
def test_nul_characters_are_400s_naming_the_field(base_url, event_types, subscriptions, field,
                                                  value):
    body = {"owning_application": "a", "event_types": [event_types()], "read_from": "cursors",
            field: value}
    assert field in assert_problem(subscriptions(body), 400)["detail"]


def test_unpaired_surrogates_are_400s(base_url):
    raw = '{"owning_application": "a\\ud800", "event_types": ["x"]}'
    response = requests.post(base_url + "/subscriptions", data=raw,
                             headers={"Content-Type": "application/json"})
    assert "surrogate" in assert_problem(response, 400)["detail"]


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
