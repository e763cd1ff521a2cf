"""Event-type authorization over HTTP: for every protected action, who gets a 401,
a 403, or in. PROTECTED lets alice administer and write, the service stups_app read;
root is a Nakadi administrator (NAKADI_ADMINS)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import requests

from tests.api.conftest import assert_problem
from tests.api.security.conftest import (
    EVERYONE,
    PROTECTED,
    SCHEMA,
    auth,
    business_event,
    event_type_body,
)
from tests.helpers.waiting import wait_until

BEGIN = [{"partition": "0", "offset": "begin"}]


@dataclass(frozen=True)
class Action:
    method: str
    path: str  # after /event-types/{name}
    operation: str  # the authorization list that allows it
    status: int  # when allowed
    body: object = None
    params: dict | None = None


ACTIONS = {
    "publish": Action("POST", "/events", "writers", 200, [business_event()]),
    "stream": Action("GET", "/events", "readers", 200,
                     params={"stream_timeout": "1", "batch_flush_timeout": "1"}),
    "partitions": Action("GET", "/partitions", "readers", 200),
    "partition": Action("GET", "/partitions/0", "readers", 200),
    "cursors-lag": Action("POST", "/cursors-lag", "readers", 200, BEGIN),
    "cursor-distances": Action("POST", "/cursor-distances", "readers", 200,
                               [{"initial_cursor": BEGIN[0], "final_cursor": BEGIN[0]}]),
    "shifted-cursors": Action("POST", "/shifted-cursors", "readers", 200,
                              [{**BEGIN[0], "shift": 0}]),
    "update": Action("PUT", "", "admins", 200),
    "add-schema": Action("POST", "/schemas", "admins", 200,
                         {"type": "json_schema", "schema": json.dumps(SCHEMA)}),
    "delete": Action("DELETE", "", "admins", 200),
}
RIGHT_SUBJECT = {"readers": "app", "writers": "alice", "admins": "alice"}


def stream_refused(url: str, headers: dict) -> bool:
    """Whether opening the stream is a 403 (an opened one is closed at once)."""
    with requests.get(url, headers=headers, stream=True, timeout=30) as response:
        return response.status_code == 403


def call(url: str, name: str, action: Action, headers: dict,
         authorization: dict | None = PROTECTED) -> requests.Response:
    body = action.body
    if action.method == "PUT":  # a PUT keeps the section (or its absence)
        body = event_type_body(name, authorization)
    streaming = action.params is not None
    response = requests.request(action.method, f"{url}/event-types/{name}{action.path}",
                                headers=headers, json=body, params=action.params,
                                stream=streaming, timeout=30)
    if streaming and response.status_code == 200:
        response.close()  # a stream's headers are enough
    return response


@pytest.mark.parametrize("action", ACTIONS.values(), ids=ACTIONS.keys())
def test_anonymous_and_unknown_tokens_are_401s(secure_url, protected_event_types, action):
    name = protected_event_types()
    assert_problem(call(secure_url, name, action, {}), 401)
    assert_problem(call(secure_url, name, action, auth("unknown")), 401)


@pytest.mark.parametrize("action", ACTIONS.values(), ids=ACTIONS.keys())
def test_a_subject_not_in_the_list_is_a_403_naming_the_permission(
        secure_url, protected_event_types, action):
    name = protected_event_types()
    detail = assert_problem(call(secure_url, name, action, auth("bob")), 403)["detail"]
    assert "user:bob" in detail and action.operation in detail and name in detail


@pytest.mark.parametrize("action", ACTIONS.values(), ids=ACTIONS.keys())
@pytest.mark.parametrize("who", ["right subject", "wildcard", "nakadi admin"])
def test_allowed_subjects_get_in(secure_url, protected_event_types, action, who):
    if who == "wildcard":
        name = protected_event_types({"admins": EVERYONE, "readers": EVERYONE,
                                      "writers": EVERYONE})
        subject = "bob"
    else:
        name = protected_event_types()
        subject = RIGHT_SUBJECT[action.operation] if who == "right subject" else "root"
    response = call(secure_url, name, action, auth(subject))
    assert response.status_code == action.status, response.text


def test_an_event_type_without_authorization_is_open_to_every_subject(
        secure_url, protected_event_types):
    name = protected_event_types(None)
    for action in ACTIONS.values():
        assert call(secure_url, name, action, auth("bob"), None).status_code == action.status


def test_a_missing_event_type_is_still_a_404(secure_url):
    assert_problem(requests.post(secure_url + "/event-types/sec.missing/events",
                                 headers=auth("bob"), json=[business_event()]), 404)


def test_only_an_admin_changes_the_authorization_and_it_cannot_be_removed(
        secure_url, protected_event_types):
    name = protected_event_types()
    opened = {**PROTECTED, "writers": EVERYONE}
    url = f"{secure_url}/event-types/{name}"
    assert_problem(requests.put(url, headers=auth("bob"), json=event_type_body(name, opened)),
                   403)
    assert requests.put(url, headers=auth("alice"),
                        json=event_type_body(name, opened)).status_code == 200
    wait_until(lambda: all(requests.post(url + "/events", headers=auth("bob"),
                                         json=[business_event()]).status_code == 200
                           for _ in range(6)), what="bob publishes on every worker")
    assert_problem(requests.put(url, headers=auth("alice"),
                                json=event_type_body(name, None)), 422)


@pytest.mark.parametrize(("authorization", "field"), [
    ({**PROTECTED, "readers": []}, "authorization.readers"),
    ({**PROTECTED, "admins": [{"data_type": "user", "value": " "}]},
     "authorization.admins[0].value"),
    ({**PROTECTED, "writers": [{"data_type": "user"}]}, "authorization.writers[0].value"),
])
def test_a_malformed_authorization_section_is_a_422(secure_url, authorization, field):
    response = requests.post(secure_url + "/event-types", headers=auth("root"),
                             json=event_type_body("sec.bad", authorization))
    assert field in assert_problem(response, 422)["detail"]


def test_a_stream_whose_reader_loses_permission_is_closed(secure_url, protected_event_types):
    name = protected_event_types()
    url = f"{secure_url}/event-types/{name}"
    with requests.get(url + "/events", headers=auth("app"), stream=True, timeout=30,
                      params={"stream_timeout": "60", "batch_flush_timeout": "1"}) as stream:
        assert stream.status_code == 200
        others = {**PROTECTED, "readers": [{"data_type": "user", "value": "alice"}]}
        assert requests.put(url, headers=auth("alice"),
                            json=event_type_body(name, others)).status_code == 200
        lines = [json.loads(line) for line in stream.iter_lines()]
    # A keep-alive a second: it ended long before its 60 s stream_timeout.
    assert len(lines) < 30 and all(line["cursor"]["partition"] == "0" for line in lines)
    wait_until(lambda: all(stream_refused(url + "/events", auth("app")) for _ in range(6)),
               what="the reader refused on every worker")


def keep_alives_until_closed(url: str, change: dict) -> list[dict]:
    """The lines of app's stream (12 s stream_timeout, a keep-alive a second) opened
    before alice PUTs ``change`` as the event type's authorization, and after it for at
    most ~12 s."""
    with requests.get(url + "/events", headers=auth("app"), stream=True, timeout=30,
                      params={"stream_timeout": "12", "batch_flush_timeout": "1"}) as stream:
        assert stream.status_code == 200
        assert requests.put(url, headers=auth("alice"),
                            json=event_type_body(url.rsplit("/", 1)[1], change)
                            ).status_code == 200
        return [json.loads(line) for line in stream.iter_lines()]


def test_a_change_of_readers_closes_the_streams_of_readers_who_stay(
        secure_url, protected_event_types):
    """The spec: "If the update changes the list of readers, then all consumers will be
    disconnected. It is expected that they will try to reconnect, which will only work for
    those that are still authorized." app stays a reader, so it may reconnect."""
    name = protected_event_types()
    url = f"{secure_url}/event-types/{name}"
    more = {**PROTECTED, "readers": [*PROTECTED["readers"],
                                     {"data_type": "user", "value": "bob"}]}
    assert len(keep_alives_until_closed(url, more)) < 8
    assert not stream_refused(url + "/events", auth("app"))


def test_a_change_that_keeps_the_readers_keeps_the_streams(secure_url, protected_event_types):
    name = protected_event_types()
    url = f"{secure_url}/event-types/{name}"
    other_writers = {**PROTECTED, "writers": [{"data_type": "user", "value": "bob"}]}
    assert len(keep_alives_until_closed(url, other_writers)) >= 10


def test_the_stream_check_applies_to_every_worker(secure_url, protected_event_types):
    """Both workers serve requests: each one hears of the change."""
    name = protected_event_types()
    url = f"{secure_url}/event-types/{name}"
    requests.put(url, headers=auth("alice"), json=event_type_body(name, {
        **PROTECTED, "writers": [{"data_type": "user", "value": "bob"}]}))

    def refused_everywhere() -> bool:
        return all(requests.post(url + "/events", headers=auth("alice"),
                                 json=[business_event()]).status_code == 403
                   for _ in range(6))

    wait_until(refused_everywhere, what="alice refused on every worker")


def test_only_nakadi_admins_create_change_or_delete_the_kpi_event_types(secure_url):
    """The broker publishes every tenant's use into whichever event type has a KPI
    name: bob could create one first as its only reader, or change the readers of
    the broker's, and read it all alone."""
    name = "nakadi.subscription.log"
    requests.delete(f"{secure_url}/event-types/{name}", headers=auth("root"))
    only_bob = {key: [{"data_type": "user", "value": "bob"}]
                for key in ("admins", "readers", "writers")}
    detail = assert_problem(requests.post(secure_url + "/event-types", headers=auth("bob"),
                                          json=event_type_body(name, only_bob)), 403)["detail"]
    assert "KPI event types" in detail
    open_to_all = event_type_body(name, None)
    created = requests.post(secure_url + "/event-types", headers=auth("root"), json=open_to_all)
    assert created.status_code == 201, created.text
    try:
        # Open to every caller, as the broker creates them, but not to be taken over.
        changed = requests.put(f"{secure_url}/event-types/{name}", headers=auth("bob"),
                               json=event_type_body(name, only_bob))
        assert "KPI event types" in assert_problem(changed, 403)["detail"]
        deleted = requests.delete(f"{secure_url}/event-types/{name}", headers=auth("bob"))
        assert "KPI event types" in assert_problem(deleted, 403)["detail"]
        assert requests.get(f"{secure_url}/event-types/{name}/partitions",
                            headers=auth("bob")).status_code == 200
    finally:
        assert requests.delete(f"{secure_url}/event-types/{name}",
                               headers=auth("root")).status_code == 200
