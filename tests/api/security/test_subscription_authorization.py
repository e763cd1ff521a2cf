"""Subscription authorization over HTTP: changing and deleting a subscription needs
one of its admins (or a Nakadi admin)."""

from __future__ import annotations

import json
import uuid

import pytest
import requests

from tests.api.conftest import assert_problem
from tests.api.security.conftest import EVERYONE, auth, event_type_body
from tests.helpers.waiting import wait_until

SECTION = {"admins": [{"data_type": "user", "value": "alice"}],
           "readers": [{"data_type": "service", "value": "stups_app"}]}


@pytest.fixture
def subscription(secure_url, protected_event_types):
    """Creates subscriptions (as root) on an open event type; deletes them afterwards."""
    ids: list[str] = []
    name = protected_event_types(None)

    def create(authorization: dict | None = SECTION, owner: str = "sec-test") -> str:
        body = {"owning_application": owner, "event_types": [name]}
        if authorization is not None:
            body["authorization"] = authorization
        response = requests.post(secure_url + "/subscriptions", headers=auth("root"),
                                 json=body)
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
        return ids[-1]

    yield create
    for subscription_id in ids:
        requests.delete(f"{secure_url}/subscriptions/{subscription_id}", headers=auth("root"))


def change(url: str, subscription_id: str, method: str, headers: dict) -> requests.Response:
    body = {"authorization": SECTION} if method == "PUT" else None
    return requests.request(method, f"{url}/subscriptions/{subscription_id}",
                            headers=headers, json=body)


@pytest.mark.parametrize("method", ["PUT", "DELETE"])
def test_changing_a_subscription_needs_one_of_its_admins(secure_url, subscription, method):
    subscription_id = subscription()
    assert_problem(change(secure_url, subscription_id, method, {}), 401)
    assert_problem(change(secure_url, subscription_id, method, auth("unknown")), 401)
    detail = assert_problem(change(secure_url, subscription_id, method, auth("app")),
                            403)["detail"]
    assert "service:stups_app" in detail and "admins" in detail
    assert change(secure_url, subscription_id, method, auth("alice")).status_code == 204


@pytest.mark.parametrize("method", ["PUT", "DELETE"])
@pytest.mark.parametrize("who", ["wildcard", "nakadi admin", "no section"])
def test_wildcards_nakadi_admins_and_open_subscriptions(secure_url, subscription, method, who):
    authorization = {"wildcard": {"admins": EVERYONE, "readers": EVERYONE},
                     "nakadi admin": SECTION, "no section": None}[who]
    subscription_id = subscription(authorization)
    subject = "root" if who == "nakadi admin" else "bob"
    assert change(secure_url, subscription_id, method, auth(subject)).status_code == 204


def test_a_missing_subscription_is_still_a_404(secure_url):
    assert_problem(change(secure_url, "6e1c7a4e-1b8e-4c39-a0f1-7d4c8d3b2a10", "DELETE",
                          auth("bob")), 404)


# Streaming and cursors: subscription readers that also read every event type.

STREAM_ID = "X-Nakadi-StreamId"
STREAM_PARAMS = {"stream_timeout": "60", "batch_flush_timeout": "1"}


@pytest.fixture
def protected_subscription(secure_url, protected_event_types):
    """Subscriptions (created as root, reading from begin) on a new event type; both carry
    the given sections (the subscription's, then the event type's: by default alice
    administers both and may read the event type). Deleted afterwards."""
    ids: list[str] = []

    def create(section: dict = SECTION, event_type_section: dict | None = None) -> str:
        name = protected_event_types(event_type_section or {
            "admins": SECTION["admins"], "readers": SECTION["readers"] + SECTION["admins"],
            "writers": [{"data_type": "user", "value": "alice"}]})
        response = requests.post(secure_url + "/subscriptions", headers=auth("root"), json={
            "owning_application": "sec-test", "event_types": [name], "read_from": "begin",
            "authorization": section})
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
        return ids[-1]

    yield create
    for subscription_id in ids:
        requests.delete(f"{secure_url}/subscriptions/{subscription_id}", headers=auth("root"))


def open_stream(url: str, subscription_id: str, headers: dict) -> requests.Response:
    return requests.get(f"{url}/subscriptions/{subscription_id}/events", headers=headers,
                        params=STREAM_PARAMS, stream=True, timeout=30)


def stream_status(url: str, subscription_id: str, headers: dict) -> int:
    with open_stream(url, subscription_id, headers) as response:
        return response.status_code


def stream_asking_status(url: str, subscription_id: str, headers: dict) -> int:
    """A stream (POST) asking for a partition outside the subscription: a 422 for a
    reader, which names the subscription's partitions; before, everyone got it."""
    with requests.post(f"{url}/subscriptions/{subscription_id}/events", headers=headers,
                       json={"partitions": [{"event_type": "other", "partition": "9"}]},
                       stream=True, timeout=30) as response:
        return response.status_code


def commit_status(url: str, subscription_id: str, headers: dict) -> int:
    """Open a stream as the caller and commit the cursor of its first line."""
    with open_stream(url, subscription_id, headers) as stream:
        if stream.status_code != 200:
            return stream.status_code
        cursor = json.loads(next(stream.iter_lines()))["cursor"]
        return requests.post(f"{url}/subscriptions/{subscription_id}/cursors",
                             headers={**headers, STREAM_ID: stream.headers[STREAM_ID]},
                             json={"items": [cursor]}).status_code


def anonymous_commit_status(url: str, subscription_id: str, headers: dict) -> int:
    """A commit of someone who could not have streamed: refused before anything else."""
    return requests.post(f"{url}/subscriptions/{subscription_id}/cursors",
                         headers={**headers, STREAM_ID: str(uuid.uuid4())},
                         json={"items": []}).status_code


def view_status(path: str):
    def status(url: str, subscription_id: str, headers: dict) -> int:
        return requests.get(f"{url}/subscriptions/{subscription_id}/{path}",
                            headers=headers).status_code
    return status


def reset_status(url: str, subscription_id: str, headers: dict) -> int:
    return requests.patch(f"{url}/subscriptions/{subscription_id}/cursors", headers=headers,
                          json={"items": []}).status_code


# action: (how it is tried by an allowed caller, by a refused one, who may, statuses allowed)
ACTIONS = {
    "stream": (stream_status, stream_status, "app", {200}),
    "stream asking": (stream_asking_status, stream_asking_status, "app", {422}),
    "commit": (commit_status, anonymous_commit_status, "app", {200, 204}),
    "cursors": (view_status("cursors"), view_status("cursors"), "app", {200}),
    "stats": (view_status("stats"), view_status("stats"), "app", {200}),
    "reset": (reset_status, reset_status, "alice", {204, 422}),
}


@pytest.mark.parametrize("action", ACTIONS, ids=ACTIONS.keys())
def test_subscription_actions_refuse_anonymous_unknown_and_wrong_subjects(
        secure_url, protected_subscription, action):
    subscription_id = protected_subscription()
    _, refused, _, _ = ACTIONS[action]
    assert refused(secure_url, subscription_id, {}) == 401
    assert refused(secure_url, subscription_id, auth("unknown")) == 401
    assert refused(secure_url, subscription_id, auth("bob")) == 403


@pytest.mark.parametrize("action", ACTIONS, ids=ACTIONS.keys())
@pytest.mark.parametrize("who", ["right subject", "wildcard", "nakadi admin"])
def test_subscription_actions_let_allowed_subjects_in(secure_url, protected_subscription,
                                                      action, who):
    allowed, _, right, statuses = ACTIONS[action]
    if who == "wildcard":
        everyone = {"admins": EVERYONE, "readers": EVERYONE}
        subscription_id = protected_subscription(everyone, {**everyone, "writers": EVERYONE})
        subject = "bob"
    else:
        subscription_id = protected_subscription()
        subject = right if who == "right subject" else "root"
    assert allowed(secure_url, subscription_id, auth(subject)) in statuses


def test_streaming_needs_reading_every_event_type_too(secure_url, protected_subscription):
    everyone = {"admins": EVERYONE, "readers": EVERYONE}
    only_alice = {"admins": SECTION["admins"], "writers": SECTION["admins"],
                  "readers": [{"data_type": "user", "value": "alice"}]}
    subscription_id = protected_subscription(everyone, only_alice)
    with open_stream(secure_url, subscription_id, auth("bob")) as response:
        detail = assert_problem(response, 403)["detail"]
    assert "user:bob may not read EventType" in detail
    assert anonymous_commit_status(secure_url, subscription_id, auth("bob")) == 403
    assert stream_status(secure_url, subscription_id, auth("alice")) == 200


@pytest.mark.parametrize("path", ["stats", "cursors"])
def test_stats_and_cursors_need_reading_every_event_type_too(secure_url, protected_subscription,
                                                            path):
    """They tell the event types' counts and offsets: a subscription open to everyone
    showed them to callers who may not read its event types."""
    everyone = {"admins": EVERYONE, "readers": EVERYONE}
    only_alice = {"admins": SECTION["admins"], "writers": SECTION["admins"],
                  "readers": [{"data_type": "user", "value": "alice"}]}
    subscription_id = protected_subscription(everyone, only_alice)
    response = requests.get(f"{secure_url}/subscriptions/{subscription_id}/{path}",
                            headers=auth("bob"))
    assert "user:bob may not read EventType" in assert_problem(response, 403)["detail"]
    assert view_status(path)(secure_url, subscription_id, auth("alice")) == 200


def test_a_listing_shows_status_only_of_subscriptions_whose_stats_the_caller_may_see(
        secure_url, protected_subscription):
    everyone = {"admins": EVERYONE, "readers": EVERYONE}
    visible = protected_subscription(everyone, {**everyone, "writers": EVERYONE})
    hidden = protected_subscription()  # readers: service:stups_app

    def statuses(subject: str) -> dict[str, bool]:
        response = requests.get(secure_url + "/subscriptions", headers=auth(subject),
                                params={"owning_application": "sec-test",
                                        "show_status": "true", "limit": 1000})
        assert response.status_code == 200, response.text
        return {item["id"]: "status" in item for item in response.json()["items"]
                if item["id"] in (visible, hidden)}

    assert statuses("bob") == {visible: True, hidden: False}
    assert statuses("app") == {visible: True, hidden: True}


def test_a_subscription_stream_closes_when_its_reader_loses_permission(
        secure_url, protected_subscription):
    subscription_id = protected_subscription()
    with open_stream(secure_url, subscription_id, auth("app")) as stream:
        assert stream.status_code == 200
        response = requests.put(f"{secure_url}/subscriptions/{subscription_id}",
                                headers=auth("alice"), json={"authorization": {
                                    **SECTION, "readers": SECTION["admins"]}})
        assert response.status_code == 204
        lines = [json.loads(line) for line in stream.iter_lines()]
    # A keep-alive a second: it ended long before its 60 s stream_timeout.
    assert len(lines) < 30
    assert stream_status(secure_url, subscription_id, auth("app")) == 403


def test_a_subscription_stream_closes_when_its_event_types_readers_change(
        secure_url, protected_subscription):
    """The spec: a change of an event type's readers disconnects all its consumers; app
    stays a reader, so it reconnects, and the last line says why the stream ended."""
    subscription_id = protected_subscription()
    name = requests.get(f"{secure_url}/subscriptions/{subscription_id}",
                        headers=auth("root")).json()["event_types"][0]
    readers = SECTION["readers"] + SECTION["admins"] + [{"data_type": "user", "value": "bob"}]
    with open_stream(secure_url, subscription_id, auth("app")) as stream:
        assert stream.status_code == 200
        response = requests.put(f"{secure_url}/event-types/{name}", headers=auth("alice"),
                                json=event_type_body(name, {
                                    "admins": SECTION["admins"], "readers": readers,
                                    "writers": [{"data_type": "user", "value": "alice"}]}))
        assert response.status_code == 200, response.text
        lines = [json.loads(line) for line in stream.iter_lines()]
    assert len(lines) < 30
    assert lines[-1]["info"]["debug"] == (f"Stream closed: the readers of the event type {name} "
                                          "changed: reconnect")
    assert stream_status(secure_url, subscription_id, auth("app")) == 200


def test_a_blacklisted_consumer_subscription_stream_closes(secure_url, protected_subscription):
    subscription_id = protected_subscription()
    with open_stream(secure_url, subscription_id, auth("app")) as stream:
        assert stream.status_code == 200
        requests.put(f"{secure_url}/settings/blacklist/CONSUMER_APP/stups_app",
                     headers=auth("root"))
        lines = [json.loads(line) for line in stream.iter_lines()]
    assert len(lines) < 30
    wait_until(lambda: all(stream_status(secure_url, subscription_id, auth("app")) == 403
                           for _ in range(6)), what="the consumer blocked on every worker")


def test_creating_a_subscription_needs_reading_every_event_type(secure_url,
                                                                protected_event_types):
    """Its cursors' checks would tell a caller who may not read the event type its
    partitions' offsets (422 naming the newest), and its stats their events' count."""
    name = protected_event_types({"admins": SECTION["admins"], "readers": SECTION["readers"],
                                  "writers": [{"data_type": "user", "value": "alice"}]})
    far = {"event_type": name, "partition": "0", "offset": "001-0001-000000000000009999"}
    body = {"owning_application": "sec-test", "event_types": [name],
            "read_from": "cursors", "initial_cursors": [far]}
    for who in ("bob", "alice"):  # authenticated, scoped; not a reader of the event type
        response = requests.post(secure_url + "/subscriptions", headers=auth(who), json=body)
        detail = assert_problem(response, 403)["detail"]
        assert f"user:{who} may not read EventType" in detail and "001-" not in detail
    response = requests.post(secure_url + "/subscriptions", headers=auth("app"),
                             json={**body, "read_from": "begin"})
    assert response.status_code == 201, response.text
    requests.delete(f"{secure_url}/subscriptions/{response.json()['id']}", headers=auth("root"))


def test_resetting_cursors_needs_reading_every_event_type(secure_url, protected_subscription):
    """A subscription admin who may not read its event type learnt the partitions'
    offsets from the reset's 422s."""
    subscription_id = protected_subscription(
        SECTION, {"admins": SECTION["admins"], "readers": SECTION["readers"],
                  "writers": SECTION["admins"]})
    name = requests.get(f"{secure_url}/subscriptions/{subscription_id}",
                        headers=auth("root")).json()["event_types"][0]
    far = {"event_type": name, "partition": "0", "offset": "001-0001-000000000000009999"}
    response = requests.patch(f"{secure_url}/subscriptions/{subscription_id}/cursors",
                              headers=auth("alice"), json={"items": [far]})
    detail = assert_problem(response, 403)["detail"]
    assert "user:alice may not read EventType" in detail and "001-" not in detail
    response = requests.patch(f"{secure_url}/subscriptions/{subscription_id}/cursors",
                              headers=auth("root"), json={"items": [far]})
    assert "001-" in assert_problem(response, 422)["detail"]
