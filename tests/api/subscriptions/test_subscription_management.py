"""Listing, reading, changing and deleting subscriptions over HTTP against a real gunicorn."""

from __future__ import annotations

import uuid

import pytest
import requests
from kazoo.client import KazooClient

from app.coordination.subscription_nodes import subscription_path
from app.repository.event_types import event_type_with_timelines
from tests.api.conftest import assert_problem
from tests.api.subscriptions.conftest import AUTHORIZATION, owner

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
    str(uuid.uuid4()), "not-a-uuid", "' OR 1=1 --", "x" * 3000, "0" * 32,
    "{" + str(uuid.uuid4()) + "}",
])
def test_unknown_or_malformed_ids_are_404s(base_url, subscription_id):
    url = f"{base_url}/subscriptions/{subscription_id}"
    assert_problem(requests.get(url), 404)
    assert_problem(requests.delete(url), 404)
    assert_problem(requests.put(url, json={"authorization": AUTHORIZATION}), 404)


def test_a_nul_character_in_the_id_is_a_400(base_url):
    url = f"{base_url}/subscriptions/%00"
    for response in (requests.get(url), requests.delete(url),
                     requests.put(url, json={"authorization": AUTHORIZATION})):
        assert "NUL" in assert_problem(response, 400)["detail"]


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
    assert event_type_with_timelines(pool, name) is not None
    assert requests.delete(f"{base_url}/subscriptions/{subscription_id}").status_code == 204
    assert requests.delete(f"{base_url}/event-types/{name}").status_code == 200
