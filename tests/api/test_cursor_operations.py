"""``cursor-distances``, ``cursors-lag`` and ``shifted-cursors`` over HTTP, on each engine."""

from __future__ import annotations

import pytest
import requests

from tests.api.conftest import assert_problem
from tests.helpers.broker import new_event_type, publish_to
from tests.helpers.storage import BEFORE_FIRST_OFFSET as BEFORE_FIRST
from tests.helpers.storage import expire, off

OPERATIONS = ["cursor-distances", "cursors-lag", "shifted-cursors"]


@pytest.fixture
def event_type(base_url, default_storage):
    """4 partitions on the default storage: 5 events in partition 0, 2 in partition 1."""
    name = new_event_type(base_url, partition_strategy="user_defined")
    publish_to(base_url, name, 0, 5)
    publish_to(base_url, name, 1, 2)
    yield name
    requests.delete(f"{base_url}/event-types/{name}")


def call(base_url: str, name: str, operation: str, body) -> requests.Response:
    return requests.post(f"{base_url}/event-types/{name}/{operation}", json=body)


def cursor(partition: str, offset: str, **extra) -> dict:
    return {"partition": partition, "offset": offset, **extra}


def pair(initial: dict, final: dict) -> dict:
    return {"initial_cursor": initial, "final_cursor": final}


# -- cursor-distances -----------------------------------------------------------


def test_distances_count_events_after_initial_up_to_final(base_url, event_type):
    queries = [
        pair(cursor("0", off(2)), cursor("0", off(2))),
        pair(cursor("0", off(0)), cursor("0", off(4))),
        pair(cursor("0", "begin"), cursor("0", off(4))),
        pair(cursor("0", BEFORE_FIRST), cursor("0", off(0))),
        pair(cursor("0", off(4)), cursor("0", off(1))),
        pair(cursor("1", "BEGIN"), cursor("1", "begin")),
        pair(cursor("2", "begin"), cursor("2", BEFORE_FIRST)),
    ]
    response = call(base_url, event_type, "cursor-distances", queries)
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == [dict(query, distance=distance)
                               for query, distance in zip(queries, [0, 4, 5, 1, -3, 0, 0],
                                                          strict=True)]


def test_distance_answer_echoes_only_the_cursor_fields(base_url, event_type):
    query = pair(cursor("1", off(0), event_type="x"), cursor("1", off(1)))
    response = call(base_url, event_type, "cursor-distances", [query])
    assert response.json() == [{"initial_cursor": cursor("1", off(0)),
                                "final_cursor": cursor("1", off(1)), "distance": 1}]


@pytest.mark.parametrize(("query", "expected"), [
    ("x", "body[0] must be an object with initial_cursor and final_cursor"),
    ({"initial_cursor": cursor("0", off(0))}, "body[0].final_cursor is required"),
    ({"final_cursor": cursor("0", off(0))}, "body[0].initial_cursor is required"),
    (pair(cursor("0", off(0)), cursor("1", off(0))),
     'body[0]: initial_cursor is in partition "0" and final_cursor in partition "1"'),
    (pair(cursor("0", off(5)), cursor("0", off(0))),
     "body[0].initial_cursor: cursor {partition: '0', offset: '001-0001-000000000000000005'}: "
     "the offset does not exist"),
    (pair(cursor("0", off(0)), cursor("7", off(0))),
     "body[0].final_cursor: cursor {partition: '7', offset: '001-0001-000000000000000000'}: "
     "partition '7' does not exist"),
    (pair(cursor("0", off(0)), {"partition": "0"}), "body[0].final_cursor: cursor"),
])
def test_invalid_distance_queries_are_a_422_naming_them(base_url, event_type, query, expected):
    response = call(base_url, event_type, "cursor-distances",
                    [pair(cursor("0", off(0)), cursor("0", off(1))), query])
    assert expected.replace("body[0]", "body[1]") in assert_problem(response, 422)["detail"]


# -- cursors-lag ----------------------------------------------------------------


def test_lag_reports_each_cursors_partition_in_request_order(base_url, event_type):
    cursors = [cursor("1", off(0)), cursor("0", "begin"), cursor("0", off(4)),
               cursor("3", "begin")]
    response = call(base_url, event_type, "cursors-lag", cursors)
    assert response.status_code == 200, response.text

    def view(number, newest, unconsumed):
        return {"partition": number, "oldest_available_offset": off(0),
                "newest_available_offset": newest, "unconsumed_events": unconsumed}

    assert response.json() == [view("1", off(1), 1), view("0", off(4), 5),
                               view("0", off(4), 0), view("3", BEFORE_FIRST, 0)]
    assert call(base_url, event_type, "cursors-lag", []).json() == []


@pytest.mark.parametrize(("item", "expected"), [
    (["0"], "body[1]: cursor ['0'] must be an object with partition and offset"),
    ({"partition": "0", "offset": 3}, "body[1]: cursor {partition: '0', offset: 3} needs"),
    (cursor("1", off(2)), "body[1]: cursor {partition: '1', offset: "
                          "'001-0001-000000000000000002'}: the offset does not exist; "
                          "the newest event is at 001-0001-000000000000000001"),
    (cursor("1", "end"), "offset 'end' is not of the form 001-TTTT-NNNNNNNNNNNNNNNNNN"),
])
def test_invalid_lag_cursors_are_a_422_naming_them(base_url, event_type, item, expected):
    response = call(base_url, event_type, "cursors-lag", [cursor("0", off(0)), item])
    assert expected in assert_problem(response, 422)["detail"]


# -- shifted-cursors --------------------------------------------------------------


def test_shifts_move_cursors_within_the_partition(base_url, event_type):
    shifts = [
        (cursor("0", off(1), shift=2), off(3)),  # forward
        (cursor("0", off(3), shift=-2), off(1)),  # backward
        (cursor("0", off(2), shift=0), off(2)),
        (cursor("0", off(0), shift=4), off(4)),  # to the newest event
        (cursor("0", off(4), shift=-5), BEFORE_FIRST),  # to before the oldest
        (cursor("0", "begin", shift=0), BEFORE_FIRST),
        (cursor("0", "begin", shift=5), off(4)),
        (cursor("1", "BEGIN", shift=1), off(0)),
        (cursor("2", "begin", shift=0), BEFORE_FIRST),  # an empty partition
    ]
    response = call(base_url, event_type, "shifted-cursors", [item for item, _ in shifts])
    assert response.status_code == 200, response.text
    assert response.json() == [cursor(item["partition"], offset) for item, offset in shifts]


@pytest.mark.parametrize(("item", "expected"), [
    (cursor("0", off(4), shift=1),
     "body[1] cursor {partition: '0', offset: '001-0001-000000000000000004'}: shifting by 1 "
     "leads to an offset that does not exist yet; the newest event is at "
     "001-0001-000000000000000004, so the largest shift is 0"),
    (cursor("0", "begin", shift=6), "the largest shift is 5"),
    (cursor("2", "begin", shift=1),
     "the partition has no available events, so the largest shift is 0"),
    (cursor("0", off(1), shift=-3),
     "shifting by -3 leads to an expired position; the oldest available event is at "
     "001-0001-000000000000000000, so the smallest shift is -2 (to 001-0001--1)"),
    (cursor("0", "begin", shift=-1), "the smallest shift is 0"),
    (cursor("0", off(0)), "body[1].shift is required"),
    (cursor("0", off(0), shift="1"), 'body[1].shift must be an integer number of events, '
                                     'got "1"'),
    (cursor("0", off(0), shift=1.5), "got 1.5"),
    (cursor("0", off(0), shift=True), "got true"),
    (cursor("0", off(0), shift=None), "got null"),
    (cursor("9", off(0), shift=0), "partition '9' does not exist"),
    (cursor("0", off(5), shift=-1), "body[1]: cursor {partition: '0', offset: "
                                    "'001-0001-000000000000000005'}: the offset does not exist"),
    ([], "body[1] must be an object with partition, offset and shift"),
])
def test_invalid_shifts_are_a_422_naming_them(base_url, event_type, item, expected):
    response = call(base_url, event_type, "shifted-cursors",
                    [cursor("0", off(0), shift=1), item])
    assert expected in assert_problem(response, 422)["detail"]


# -- expired events (postgres: retention can be simulated there) ------------------


@pytest.mark.parametrize("default_storage", ["postgres"], indirect=True)
def test_operations_respect_the_oldest_available_event(base_url, pool, event_type):
    expire(pool, event_type, 0, 2)  # partition 0 keeps offsets 2..4
    shifted = call(base_url, event_type, "shifted-cursors",
                   [cursor("0", off(4), shift=-3), cursor("0", "begin", shift=1)])
    assert shifted.json() == [cursor("0", off(1)), cursor("0", off(2))]
    too_far = call(base_url, event_type, "shifted-cursors", [cursor("0", off(3), shift=-3)])
    assert ("leads to an expired position; the oldest available event is at "
            "001-0001-000000000000000002, so the smallest shift is -2") in assert_problem(
        too_far, 422)["detail"]

    distance = call(base_url, event_type, "cursor-distances",
                    [pair(cursor("0", "begin"), cursor("0", off(4)))])
    assert distance.json()[0]["distance"] == 3
    lag = call(base_url, event_type, "cursors-lag", [cursor("0", off(1))])
    assert lag.json() == [{"partition": "0", "oldest_available_offset": off(2),
                           "newest_available_offset": off(4), "unconsumed_events": 3}]

    for operation, body in [
        ("cursor-distances", [pair(cursor("0", off(0)), cursor("0", off(4)))]),
        ("cursors-lag", [cursor("0", off(0))]),
        ("shifted-cursors", [cursor("0", off(0), shift=4)]),
    ]:
        detail = assert_problem(call(base_url, event_type, operation, body), 422)["detail"]
        assert ("'001-0001-000000000000000000'}: the offset has expired; the oldest available "
                "event is at 001-0001-000000000000000002") in detail


# -- bodies ----------------------------------------------------------------------


@pytest.mark.parametrize("operation", OPERATIONS)
def test_unknown_event_type_is_404(base_url, operation):
    response = call(base_url, "no.such-type", operation, [])
    assert "EventType 'no.such-type' does not exist" in assert_problem(response, 404)["detail"]


@pytest.mark.parametrize("operation", OPERATIONS)
def test_malformed_json_is_a_400(base_url, event_type, operation):
    for body in (b"[{", b"", b"\xff"):
        response = requests.post(f"{base_url}/event-types/{event_type}/{operation}", data=body,
                                 headers={"Content-Type": "application/json"})
        assert "the body is not valid JSON" in assert_problem(response, 400)["detail"]


@pytest.mark.parametrize("operation", OPERATIONS)
def test_a_body_that_is_not_an_array_is_a_422(base_url, event_type, operation):
    for body in (b'{"partition": "0", "offset": "begin"}', b'"begin"', b"null"):
        response = requests.post(f"{base_url}/event-types/{event_type}/{operation}", data=body,
                                 headers={"Content-Type": "application/json"})
        detail = assert_problem(response, 422)["detail"]
        assert "the body must be a JSON array of" in detail


@pytest.mark.parametrize("operation", OPERATIONS)
def test_a_body_other_than_json_is_a_415(base_url, event_type, operation):
    url = f"{base_url}/event-types/{event_type}/{operation}"
    for headers in ({"Content-Type": "text/plain"}, {}):
        response = requests.post(url, data=b"[]", headers=headers)
        assert "Content-Type must be application/json" in assert_problem(response, 415)[
            "detail"]
