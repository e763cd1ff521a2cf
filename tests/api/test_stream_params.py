"""Stream parameters are int32 counts written in ASCII digits, as 001 defines them
(``type: integer, format: int32``); anything else is a 422 naming the parameter."""

from __future__ import annotations

import uuid

import pytest
import requests

from tests.api.conftest import assert_problem

INT32_MAX = 2**31 - 1


@pytest.fixture(scope="module")
def event_type(server):
    """One event type for the module, on the session's server (which ``base_url`` is)."""
    name = f"params.test-{uuid.uuid4().hex[:10]}"
    response = requests.post(f"{server.url}/event-types", json={
        "name": name, "owning_application": "audit", "category": "undefined",
        "partition_strategy": "random", "schema": {"type": "json_schema", "schema": "{}"}})
    assert response.status_code == 201, response.text
    yield name
    requests.delete(f"{server.url}/event-types/{name}")


@pytest.mark.parametrize("name", ["batch_limit", "stream_limit", "batch_flush_timeout",
                                  "stream_timeout", "stream_keep_alive_limit"])
@pytest.mark.parametrize("value", [str(INT32_MAX + 1), "1_0", "+5", " 5", "\u0665"])
def test_values_that_are_not_int32_digits_are_422s_naming_the_parameter(
        base_url, event_type, name, value):
    response = requests.get(f"{base_url}/event-types/{event_type}/events",
                            params={name: value}, timeout=15)
    assert name in assert_problem(response, 422)["detail"]


def test_the_largest_int32_is_accepted(base_url, event_type):
    params = {"batch_limit": INT32_MAX, "stream_limit": INT32_MAX,
              "stream_keep_alive_limit": 1, "batch_flush_timeout": 1,
              "stream_timeout": INT32_MAX}  # past 4200: the default, as 001 says
    with requests.get(f"{base_url}/event-types/{event_type}/events", params=params,
                      stream=True, timeout=15) as response:
        assert response.status_code == 200, response.text
        assert [line for line in response.iter_lines() if line] == [
            b'{"cursor":{"partition":"0","offset":"001-0001--1"}}']
