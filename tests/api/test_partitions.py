"""``/event-types/{name}/partitions`` over HTTP, on each storage engine."""

from __future__ import annotations

import json

import pytest
import requests

from tests.api.conftest import assert_problem
from tests.helpers.broker import new_event_type, publish_to
from tests.helpers.storage import BEFORE_FIRST_OFFSET as BEFORE_FIRST
from tests.helpers.storage import expire, off


@pytest.fixture
def event_type(base_url, default_storage):
    """An event type with 4 partitions on the default storage; events go where they say."""
    name = new_event_type(base_url, partition_strategy="user_defined")
    yield name
    requests.delete(f"{base_url}/event-types/{name}")


def partitions(base_url: str, name: str, **params) -> requests.Response:
    return requests.get(f"{base_url}/event-types/{name}/partitions", params=params)


def partition(base_url: str, name: str, number: str, **params) -> requests.Response:
    return requests.get(f"{base_url}/event-types/{name}/partitions/{number}", params=params)


def view(number: int, oldest: str, newest: str, **extra) -> dict:
    return {"partition": str(number), "oldest_available_offset": oldest,
            "newest_available_offset": newest, **extra}


def test_empty_partitions_show_newest_before_oldest(base_url, event_type):
    response = partitions(base_url, event_type)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == [view(n, off(0), BEFORE_FIRST) for n in range(4)]
    assert partition(base_url, event_type, "2").json() == view(2, off(0), BEFORE_FIRST)


def test_published_events_move_the_newest_offset(base_url, event_type):
    publish_to(base_url, event_type, 1, 3)
    publish_to(base_url, event_type, 3, 1)
    publish_to(base_url, event_type, 1, 2)
    assert partitions(base_url, event_type).json() == [
        view(0, off(0), BEFORE_FIRST), view(1, off(0), off(4)),
        view(2, off(0), BEFORE_FIRST), view(3, off(0), off(0))]
    response = partition(base_url, event_type, "1")
    assert response.status_code == 200
    assert response.json() == view(1, off(0), off(4))


def test_cursors_add_unconsumed_events_to_their_partitions_only(base_url, event_type):
    publish_to(base_url, event_type, 1, 3)
    publish_to(base_url, event_type, 3, 2)
    cursors = [{"partition": "1", "offset": off(0)}, {"partition": "3", "offset": "BEGIN"},
               {"partition": "0", "offset": "begin"}]
    response = partitions(base_url, event_type, cursors=json.dumps(cursors))
    assert response.status_code == 200, response.text
    assert response.json() == [
        view(0, off(0), BEFORE_FIRST, unconsumed_events=0),
        view(1, off(0), off(2), unconsumed_events=2),
        view(2, off(0), BEFORE_FIRST),
        view(3, off(0), off(1), unconsumed_events=2)]
    at_newest = [{"partition": "1", "offset": off(2)}]
    assert partitions(base_url, event_type, cursors=json.dumps(at_newest)).json()[1] == view(
        1, off(0), off(2), unconsumed_events=0)
    assert partitions(base_url, event_type, cursors="[]").json() == partitions(
        base_url, event_type).json()


def test_consumed_offset_adds_unconsumed_events(base_url, event_type):
    publish_to(base_url, event_type, 0, 3)
    for consumed, unconsumed in [(off(0), 2), (off(2), 0), ("begin", 3), (BEFORE_FIRST, 3)]:
        response = partition(base_url, event_type, "0", consumed_offset=consumed)
        assert response.status_code == 200, response.text
        assert response.json() == view(0, off(0), off(2), unconsumed_events=unconsumed)
    empty = partition(base_url, event_type, "1", consumed_offset="begin")
    assert empty.json() == view(1, off(0), BEFORE_FIRST, unconsumed_events=0)


def test_unknown_event_type_is_404(base_url):
    for response in (partitions(base_url, "no.such-type"),
                     partition(base_url, "no.such-type", "0")):
        assert "EventType 'no.such-type' does not exist" in assert_problem(response, 404)[
            "detail"]


@pytest.mark.parametrize("number", ["4", "-1", "01", "x", "99999999999"])
def test_unknown_partition_is_404(base_url, event_type, number):
    detail = assert_problem(partition(base_url, event_type, number), 404)["detail"]
    assert f"has no partition '{number}'" in detail
    assert '"0" to "3"' in detail


def test_cursors_that_are_not_json_are_a_400(base_url, event_type):
    detail = assert_problem(partitions(base_url, event_type, cursors="[{partition"), 400)[
        "detail"]
    assert "'cursors' must be a URL-encoded JSON array" in detail


@pytest.mark.parametrize(("cursors", "expected"), [
    ({"partition": "0", "offset": "begin"}, "'cursors' must be a JSON array"),
    (["0"], "cursor '0' must be an object"),
    ([{"partition": "0"}], "cursor {partition: '0', offset: None} needs string fields"),
    ([{"partition": 0, "offset": "begin"}], "needs string fields partition and offset"),
    ([{"partition": "4", "offset": "begin"}], "partition '4' does not exist"),
    ([{"partition": "0", "offset": "12"}], "offset '12' is not of the form"),
    ([{"partition": "0", "offset": "001-0002-000000000000000000"}], "timeline 2"),
    ([{"partition": "0", "offset": off(1)}], "the offset does not exist; the newest event"),
    ([{"partition": "0", "offset": off(0)}, {"partition": "0", "offset": "begin"}],
     'partition "0" has more than one cursor'),
])
def test_invalid_cursors_are_a_422_naming_them(base_url, event_type, cursors, expected):
    publish_to(base_url, event_type, 0, 1)
    response = partitions(base_url, event_type, cursors=json.dumps(cursors))
    assert expected in assert_problem(response, 422)["detail"]


@pytest.mark.parametrize(("consumed", "expected"), [
    ("", "offset '' is not of the form"),
    ("42", "offset '42' is not of the form"),
    (off(3), "the offset does not exist; the newest event is at 001-0001-000000000000000001"),
    ("001-0009-000000000000000000", "the offset belongs to timeline 9"),
])
def test_invalid_consumed_offset_is_a_422_naming_it(base_url, event_type, consumed, expected):
    publish_to(base_url, event_type, 2, 2)
    response = partition(base_url, event_type, "2", consumed_offset=consumed)
    detail = assert_problem(response, 422)["detail"]
    assert detail.startswith(f"consumed_offset: cursor {{partition: '2', offset: {consumed!r}}}")
    assert expected in detail


@pytest.mark.parametrize("default_storage", ["postgres"], indirect=True)
def test_expired_events_move_the_oldest_offset(base_url, pool, event_type):
    publish_to(base_url, event_type, 0, 5)
    publish_to(base_url, event_type, 1, 3)
    expire(pool, event_type, 0, 2)
    expire(pool, event_type, 1, 3)
    # Everything in partition 1 expired: its newest offset is before its oldest (FAQ).
    assert partitions(base_url, event_type).json()[:2] == [
        view(0, off(2), off(4)), view(1, off(3), off(2))]
    for consumed, unconsumed in [(off(1), 3), ("begin", 3), (off(3), 1)]:
        response = partition(base_url, event_type, "0", consumed_offset=consumed)
        assert response.json()["unconsumed_events"] == unconsumed
    assert partition(base_url, event_type, "1", consumed_offset=off(2)).json()[
        "unconsumed_events"] == 0

    expired = partition(base_url, event_type, "0", consumed_offset=off(0))
    assert ("the offset has expired; the oldest available event is at "
            "001-0001-000000000000000002") in assert_problem(expired, 422)["detail"]
    cursors = json.dumps([{"partition": "1", "offset": off(1)}])
    assert "has expired" in assert_problem(partitions(base_url, event_type, cursors=cursors),
                                           422)["detail"]
