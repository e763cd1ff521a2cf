"""``/storages`` and ``/event-types/{name}/timelines`` are for Nakadi administrators
only: reading needs the admin ``readers`` permission, changing the ``writers`` one."""

from __future__ import annotations

import pytest
import requests

from tests.api.conftest import assert_problem
from tests.api.security.conftest import auth

ENDPOINTS = [("GET", "/storages", None), ("POST", "/storages", {}),
             ("GET", "/storages/postgres", None), ("DELETE", "/storages/no-such", None),
             ("PUT", "/storages/default/no-such", None),
             ("GET", "/event-types/no.such/timelines", None),
             ("POST", "/event-types/no.such/timelines", {"storage_id": "kafka"})]


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
def test_storages_and_timelines_are_for_nakadi_admins_only(secure_url, method, path, body):
    assert_problem(requests.request(method, secure_url + path, json=body), 401)
    detail = assert_problem(requests.request(method, secure_url + path, json=body,
                                             headers=auth("alice")), 403)["detail"]
    assert "user:alice is not one of Nakadi's administrators" in detail
    answer = requests.request(method, secure_url + path, json=body, headers=auth("root"))
    assert answer.status_code not in (401, 403), answer.text
