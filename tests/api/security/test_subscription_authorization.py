"""Subscription authorization over HTTP: changing and deleting a subscription needs
one of its admins (or a Nakadi admin)."""

from __future__ import annotations

import pytest
import requests

from tests.api.conftest import assert_problem
from tests.api.security.conftest import EVERYONE, auth

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
