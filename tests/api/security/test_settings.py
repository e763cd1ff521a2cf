"""``/settings/admins``, ``/settings/blacklist`` and ``/settings/features`` over HTTP:
only Nakadi administrators use them, and what they set applies on every instance
(the secured server and the session's open ``base_url`` server share PostgreSQL)."""

from __future__ import annotations

import json
import uuid

import pytest
import requests

from tests.api.conftest import assert_problem
from tests.api.security.conftest import PROTECTED, auth, business_event, event_type_body
from tests.helpers.waiting import wait_until

ROOT_ONLY = [{"data_type": "user", "value": "root"}]
ENDPOINTS = [("GET", "/settings/admins", None), ("POST", "/settings/admins", {}),
             ("GET", "/settings/blacklist", None),
             ("PUT", "/settings/blacklist/PRODUCER_APP/x", None),
             ("DELETE", "/settings/blacklist/PRODUCER_APP/x", None),
             ("GET", "/settings/features", None),
             ("POST", "/settings/features", {"feature": "disable_event_type_creation",
                                             "enabled": False})]


def everywhere(check, what: str) -> None:
    """Wait until ``check`` holds on every worker (a few requests in a row)."""
    wait_until(lambda: all(check() for _ in range(6)), what=what)


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
def test_settings_are_for_nakadi_admins_only(secure_url, method, path, body):
    assert_problem(requests.request(method, secure_url + path, json=body), 401)
    assert_problem(requests.request(method, secure_url + path, json=body,
                                    headers=auth("unknown")), 401)
    detail = assert_problem(requests.request(method, secure_url + path, json=body,
                                             headers=auth("alice")), 403)["detail"]
    assert "user:alice is not one of Nakadi's administrators" in detail


def test_admins_start_from_nakadi_admins_and_can_be_changed(secure_url):
    url = secure_url + "/settings/admins"
    response = requests.get(url, headers=auth("root"))
    assert response.json() == {"admins": ROOT_ONLY, "readers": ROOT_ONLY, "writers": ROOT_ONLY}
    changed = {"admins": ROOT_ONLY,
               "readers": [{"data_type": "user", "value": "alice"}, *ROOT_ONLY],
               "writers": [{"data_type": "*", "value": "*"}]}
    response = requests.post(url, headers=auth("root"), json=changed)
    assert response.status_code == 200 and response.json() == changed
    everywhere(lambda: requests.get(url, headers=auth("alice")).json() == changed,
               "alice reads the admin lists")
    # alice is an admin reader and, through the wildcard, writer, but not in admins.
    assert_problem(requests.post(url, headers=auth("alice"), json=changed), 403)


def test_nakadi_admins_read_and_write_every_event_type(secure_url, protected_event_types):
    name = protected_event_types()
    url = f"{secure_url}/event-types/{name}/events"
    assert_problem(requests.post(url, headers=auth("bob"), json=[business_event()]), 403)
    requests.post(secure_url + "/settings/admins", headers=auth("root"), json={
        "admins": ROOT_ONLY, "readers": ROOT_ONLY,
        "writers": [{"data_type": "user", "value": "bob"}]})
    everywhere(lambda: requests.post(url, headers=auth("bob"),
                                     json=[business_event()]).status_code == 200,
               "bob publishes as an admin writer")


@pytest.mark.parametrize("body", [
    {"admins": [], "readers": ROOT_ONLY, "writers": ROOT_ONLY},
    {"readers": ROOT_ONLY, "writers": ROOT_ONLY},
    {"admins": ROOT_ONLY, "readers": ROOT_ONLY, "writers": [{"data_type": "user"}]},
    {"admins": ROOT_ONLY, "readers": "root", "writers": ROOT_ONLY},
    # One statement per attribute stored: 200,000 took 17 s under a table lock.
    {"admins": ROOT_ONLY, "writers": ROOT_ONLY,
     "readers": [{"data_type": "user", "value": str(n)} for n in range(1001)]},
    [],
])
def test_admin_lists_that_would_leave_no_admin_or_are_malformed_are_422s(secure_url, body):
    url = secure_url + "/settings/admins"
    assert_problem(requests.post(url, headers=auth("root"), json=body), 422)
    assert requests.get(url, headers=auth("root")).json()["admins"] == ROOT_ONLY


def test_blacklist_lists_blocks_and_unblocks(secure_url):
    url = secure_url + "/settings/blacklist"
    for kind, name in (("PRODUCER_ET", "a.b"), ("consumer_app", "stups_app"),
                       ("CONSUMER_ET", "c.d"), ("PRODUCER_APP", "alice")):
        response = requests.put(f"{url}/{kind}/{name}", headers=auth("root"))
        assert response.status_code == 204 and not response.content
    listed = {"producers": {"event_types": ["a.b"], "apps": ["alice"]},
              "consumers": {"event_types": ["c.d"], "apps": ["stups_app"]}}
    everywhere(lambda: requests.get(url, headers=auth("root")).json() == listed,
               "every worker lists the blacklist")
    assert requests.delete(f"{url}/PRODUCER_ET/a.b", headers=auth("root")).status_code == 204
    assert requests.delete(f"{url}/PRODUCER_ET/a.b", headers=auth("root")).status_code == 204
    everywhere(lambda: requests.get(url, headers=auth("root")).json()["producers"][
        "event_types"] == [], "every worker lists the unblocked entry gone")
    assert "CONSUMER_APP" in assert_problem(
        requests.put(f"{url}/EVERYONE/x", headers=auth("root")), 422)["detail"]


def test_blocked_producers_get_403s_on_every_instance(secure_url, base_url,
                                                      protected_event_types):
    name = protected_event_types({**PROTECTED, "writers": [{"data_type": "*", "value": "*"}]})
    url = f"{secure_url}/event-types/{name}/events"
    blacklist = secure_url + "/settings/blacklist"
    requests.put(f"{blacklist}/PRODUCER_APP/alice", headers=auth("root"))
    everywhere(lambda: requests.post(url, headers=auth("alice"),
                                     json=[business_event()]).status_code == 403,
               "alice blocked")
    assert requests.post(url, headers=auth("bob"), json=[business_event()]).status_code == 200
    requests.put(f"{blacklist}/PRODUCER_ET/{name}", headers=auth("root"))
    # The open server, another instance, applies it too.
    everywhere(lambda: requests.post(f"{base_url}/event-types/{name}/events",
                                     json=[business_event()]).status_code == 403,
               "publishing blocked on the other instance")
    everywhere(lambda: f"publishing EventType '{name}' is blocked" in requests.post(
        url, headers=auth("bob"), json=[business_event()]).json()["detail"],
               "publishing blocked on the secured instance")
    requests.delete(f"{blacklist}/PRODUCER_ET/{name}", headers=auth("root"))
    everywhere(lambda: requests.post(url, headers=auth("bob"),
                                     json=[business_event()]).status_code == 200,
               "publishing unblocked")


@pytest.mark.parametrize(("kind", "blocked"), [("CONSUMER_APP", "stups_app"),
                                               ("CONSUMER_ET", None)])
def test_blocked_consumers_cannot_stream_and_their_open_streams_close(
        secure_url, protected_event_types, kind, blocked):
    name = protected_event_types()
    url = f"{secure_url}/event-types/{name}/events"
    with requests.get(url, headers=auth("app"), stream=True, timeout=30,
                      params={"stream_timeout": "60", "batch_flush_timeout": "1"}) as stream:
        assert stream.status_code == 200
        requests.put(f"{secure_url}/settings/blacklist/{kind}/{blocked or name}",
                     headers=auth("root"))
        lines = [json.loads(line) for line in stream.iter_lines()]
    # A keep-alive a second: it ended long before its 60 s stream_timeout.
    assert len(lines) < 30 and all("cursor" in line for line in lines)
    def refused() -> bool:
        with requests.get(url, headers=auth("app"), stream=True, timeout=30) as response:
            return response.status_code == 403

    everywhere(refused, "the consumer blocked on every worker")


def test_features_are_listed_and_toggled(secure_url):
    url = secure_url + "/settings/features"
    listed = requests.get(url, headers=auth("root")).json()["items"]
    assert {item["feature"] for item in listed} >= {
        "disable_event_type_creation", "disable_event_type_deletion",
        "disable_subscription_creation", "delete_event_type_with_subscriptions"}
    assert not any(item["enabled"] for item in listed)
    response = requests.post(url, headers=auth("root"),
                             json={"feature": "disable_event_type_deletion", "enabled": True})
    assert response.status_code == 204 and not response.content
    everywhere(lambda: {"feature": "disable_event_type_deletion", "enabled": True}
               in requests.get(url, headers=auth("root")).json()["items"],
               "every worker lists the feature enabled")


@pytest.mark.parametrize(("body", "named"), [
    ({"feature": "make_coffee", "enabled": True}, "feature"),
    ({"feature": "disable_event_type_creation", "enabled": "yes"}, "enabled"),
    ({"feature": "disable_event_type_creation"}, "enabled"),
    ({"enabled": True}, "feature"),
    (["disable_event_type_creation"], "feature"),
])
def test_bad_feature_bodies_are_422s(secure_url, body, named):
    response = requests.post(secure_url + "/settings/features", headers=auth("root"), json=body)
    assert named in assert_problem(response, 422)["detail"]


def _toggle(secure_url: str, feature: str, enabled: bool = True) -> None:
    assert requests.post(secure_url + "/settings/features", headers=auth("root"),
                         json={"feature": feature, "enabled": enabled}).status_code == 204


def test_disabled_event_type_creation_and_deletion_are_503s(secure_url, base_url,
                                                            protected_event_types):
    existing = protected_event_types(None)
    _toggle(secure_url, "disable_event_type_creation")
    _toggle(secure_url, "disable_event_type_deletion")
    created_early: list[str] = []

    def creation_refused() -> bool:
        # A new name each time: one created before the toggle arrived would answer 409.
        attempt = f"sec.test-{uuid.uuid4().hex[:10]}"
        response = requests.post(base_url + "/event-types",
                                 json=event_type_body(attempt, None))
        if response.status_code == 201:
            created_early.append(attempt)
        return response.status_code == 503 and "disabled" in response.json()["detail"]

    everywhere(creation_refused, "creation disabled on the open instance")
    name = f"sec.test-{uuid.uuid4().hex[:10]}"
    everywhere(lambda: requests.delete(f"{secure_url}/event-types/{existing}",
                                       headers=auth("root")).status_code == 503,
               "deletion disabled")
    _toggle(secure_url, "disable_event_type_creation", False)
    everywhere(lambda: requests.post(secure_url + "/event-types", headers=auth("root"),
                                     json=event_type_body(name, None)).status_code in (201, 409),
               "creation enabled again")
    _toggle(secure_url, "disable_event_type_deletion", False)
    everywhere(lambda: requests.delete(f"{secure_url}/event-types/{name}",
                                       headers=auth("root")).status_code in (200, 404),
               "deletion enabled again")
    for early in created_early:
        requests.delete(f"{secure_url}/event-types/{early}", headers=auth("root"))


def _subscribe(url: str, event_types: list[str], owner: str = "sec-test") -> requests.Response:
    return requests.post(url + "/subscriptions", headers=auth("root"),
                         json={"owning_application": owner, "event_types": event_types})


def test_disabled_subscription_creation_answers_only_existing_ones(
        secure_url, protected_event_types):
    name = protected_event_types(None)
    existing = _subscribe(secure_url, [name])
    assert existing.status_code == 201
    _toggle(secure_url, "disable_subscription_creation")
    created = [existing.json()["id"]]

    def creation_refused() -> bool:
        # A new owner each time: one created before the toggle arrived would answer 200.
        response = _subscribe(secure_url, [name], f"another-{uuid.uuid4().hex[:8]}")
        if response.status_code == 201:
            created.append(response.json()["id"])
        return response.status_code == 503

    everywhere(creation_refused, "subscription creation disabled")
    again = _subscribe(secure_url, [name])
    assert again.status_code == 200 and again.json()["id"] == existing.json()["id"]
    for subscription_id in created:
        requests.delete(f"{secure_url}/subscriptions/{subscription_id}", headers=auth("root"))


def test_deleting_an_event_type_with_its_subscriptions(secure_url, protected_event_types):
    name, other = protected_event_types(None), protected_event_types(None)
    alone = _subscribe(secure_url, [name]).json()["id"]
    shared = _subscribe(secure_url, [name, other]).json()["id"]
    url = f"{secure_url}/event-types/{name}"
    assert shared in assert_problem(requests.delete(url, headers=auth("root")), 422)["detail"]
    _toggle(secure_url, "delete_event_type_with_subscriptions")
    # Subscriptions that read other event types too still keep it.
    def only_shared_blocks() -> bool:
        detail = requests.delete(url, headers=auth("root")).json()["detail"]
        return shared in detail and alone not in detail

    everywhere(only_shared_blocks, "the toggle applied; the shared subscription still blocks")
    assert requests.get(f"{secure_url}/subscriptions/{alone}",
                        headers=auth("root")).status_code == 200
    requests.delete(f"{secure_url}/subscriptions/{shared}", headers=auth("root"))
    assert requests.delete(url, headers=auth("root")).status_code == 200
    assert_problem(requests.get(f"{secure_url}/subscriptions/{alone}", headers=auth("root")),
                   404)
