"""Hostile input gets a Problem 4xx that says what is wrong, never a 500, on the
endpoints that read JSON, paths and query parameters."""

from __future__ import annotations

import json
import socket

import pytest
import requests

from tests.api.conftest import assert_problem
from tests.helpers.broker import business_event, new_event_type, post

LONG = "1234567890123456789012"  # makes the server parse with the standard library
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def event_type(server):
    """One event type for the module, on the session's server (which ``base_url`` is)."""
    name = new_event_type(server.url, partition_strategy="user_defined")
    yield name
    requests.delete(f"{server.url}/event-types/{name}")


def event_text(amount: str, extra: str = "") -> str:
    event = business_event()
    metadata = json.dumps(event["metadata"])
    return f'[{{"order_number": "A", "amount": {amount}, "metadata": {metadata}{extra}}}]'


@pytest.mark.parametrize(("body", "detail"), [
    (event_text("NaN"), "not valid JSON"),
    (event_text("-Infinity"), "not valid JSON"),
    (event_text("NaN", ', "n": ' + LONG), "NaN"),
    (event_text("1e999", ', "n": ' + LONG), "too large"),
    (event_text("1", ', "s": "\\ud800"'), "surrogate"),
    (event_text("1", ', "s": "\\ud800", "n": ' + LONG), "surrogate"),
    ("[" * 3000 + "]" * 3000, "not valid JSON"),
    ("[" * 3000 + LONG + "]" * 3000, "deep"),
    (event_text("9" * 5000), "has 5000 digits"),
])
def test_publishing_refuses_what_is_not_standard_json(base_url, event_type, body, detail):
    response = requests.post(f"{base_url}/event-types/{event_type}/events", data=body,
                             headers=JSON)
    assert detail in assert_problem(response, 400)["detail"]


def test_a_nul_character_inside_an_event_is_stored_and_streamed_as_json(base_url, event_type):
    event = business_event(1, note="a\x00b")
    event["metadata"]["partition"] = "0"
    assert post(base_url, event_type, [event]).status_code == 200
    stream = requests.get(
        f"{base_url}/event-types/{event_type}/events", params={"stream_limit": 1},
        headers={"X-Nakadi-Cursors": '[{"partition": "0", "offset": "begin"}]'}, timeout=10)
    batch = json.loads(stream.text.splitlines()[0])
    assert batch["events"][0]["note"] == "a\x00b"


@pytest.mark.parametrize("body", [
    '{"name": "x.y", "owning_application": "a", "category": "undefined", "n": NaN}',
    '{"name": "x.y", "owning_application": "a\\u0000", "category": "undefined"}',
    '{"name": "x.y", "owning_application": "\\udc00", "category": "undefined"}',
    "[" * 5000 + "]" * 5000,
])
def test_event_type_bodies_refuse_nan_nul_surrogates_and_deep_nesting(base_url, body):
    response = requests.post(f"{base_url}/event-types", data=body, headers=JSON)
    assert_problem(response, 400)


@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/event-types"), ("PUT", "/event-types/{name}"), ("POST", "/subscriptions"),
    ("POST", "/event-types/{name}/cursor-distances"),
])
@pytest.mark.parametrize("body", ["[" * 1000 + "]" * 1000,
                                  "[" * 1000 + '"\\u0000"' + "]" * 1000])
def test_bodies_nested_as_deep_as_json_is_read_are_4xx(base_url, event_type, method, path,
                                                       body):
    """1,000 levels parse (the reader stops at 1,024), and looking for NUL characters in
    them recursed past Python's limit: a 500."""
    response = requests.request(method, base_url + path.format(name=event_type), data=body,
                                headers=JSON)
    assert response.status_code in (400, 422), response.text
    assert response.headers["Content-Type"] == "application/problem+json"
    if "u0000" in body:
        assert "NUL" in response.json()["detail"]


@pytest.mark.parametrize("path", ["/event-types/a%00b", "/event-types/a%00b/events",
                                  "/event-types/a%00b/partitions/0", "/event-types/a%00b/schemas"])
def test_nul_characters_in_paths_are_400s(base_url, path):
    assert "NUL" in assert_problem(requests.get(base_url + path), 400)["detail"]


def test_nul_characters_in_query_parameters_are_400s(base_url, event_type):
    response = requests.get(f"{base_url}/event-types/{event_type}/partitions",
                            params={"cursors": '[{"partition": "0\x00", "offset": "begin"}]'})
    assert "'cursors'" in assert_problem(response, 400)["detail"]


def test_cursor_parameters_refuse_what_is_not_standard_json(base_url, event_type):
    # A query too deep to parse is too long for gunicorn's request line first.
    assert_problem(requests.get(f"{base_url}/event-types/{event_type}/partitions",
                                params={"cursors": '[{"offset": NaN}]'}), 400)


@pytest.mark.parametrize("body", ["[" * 3000 + "]" * 3000, '[{"offset": NaN}]'])
def test_cursor_bodies_refuse_what_is_not_standard_json(base_url, event_type, body):
    assert_problem(requests.post(f"{base_url}/event-types/{event_type}/cursors-lag",
                                 data=body, headers=JSON), 400)


def raw_exchange(base_url: str, request: bytes) -> bytes:
    """The server's whole answer to raw request bytes, read until it closes."""
    host, port = base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(request)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize(("request_bytes", "status"), [
    (b"GET /event-types?x=" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", b"414"),
    (b"POST /event-types/{name}/events HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
     b"Content-Type: application/json\r\n\r\nzz\r\n[]\r\n0\r\n\r\n", b"400"),
    (b"GET /health HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", b"400"),
])
def test_requests_gunicorn_refuses_get_problems_too(base_url, event_type, request_bytes,
                                                    status):
    request_bytes = request_bytes.replace(b"{name}", event_type.encode())
    head, _, body = raw_exchange(base_url, request_bytes).partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0].split(b" ")[1] == status
    assert b"Content-Type: application/problem+json" in lines
    problem = json.loads(body)
    assert problem["status"] == int(status) and problem["detail"]


@pytest.mark.parametrize("codings", [b"gzip, chunked", b"deflate, chunked", b"xchunked"])
def test_transfer_codings_the_server_does_not_decode_are_501s(base_url, event_type, codings):
    """gunicorn passed gzip, deflate and compress bodies on undecoded: a gzipped `[]`
    was a 400 about UTF-8, and a plain one under that header a 200."""
    request = (b"POST /event-types/%s/cursors-lag HTTP/1.1\r\nHost: x\r\n"
               b"Content-Type: application/json\r\nTransfer-Encoding: %s\r\n\r\n"
               b"2\r\n[]\r\n0\r\n\r\n" % (event_type.encode(), codings))
    head, _, body = raw_exchange(base_url, request).partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0].split(b" ")[1] == b"501"
    assert b"Content-Type: application/problem+json" in head.split(b"\r\n")
    assert json.loads(body)["status"] == 501


def test_a_refused_request_line_is_answered_while_the_client_still_sends(base_url):
    """gunicorn refuses the request line at once; the rest of the request is read and
    dropped, so the client gets the 414 Problem instead of a connection reset."""
    host, port = base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(b"POST /event-types?x=" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n"
                           + b"X-Padding: " + b"p" * 3000 + b"\r\n" * 2 + b"[" * 500_000)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 414 ")
    assert json.loads(body)["status"] == 414


def _schema_with(schema: dict) -> dict:
    return {"type": "json_schema", "schema": json.dumps(schema)}


@pytest.mark.parametrize("where", ["pattern", "patternProperties"])
def test_a_catastrophic_pattern_does_not_hold_the_worker(base_url, where):
    """``^(a+)+$`` backtracks for seconds in Python's ``re``: published events are
    matched in linear time, so the answer comes as for any other event."""
    catastrophic = r"^(a+)+$"
    properties = {"order_number": {"type": "string"}}
    if where == "pattern":
        schema = {"properties": {**properties, "code": {"type": "string",
                                                         "pattern": catastrophic}}}
        bad, good = {"code": "a" * 40 + "!"}, {"code": "aaaa"}
    else:
        # The attack is a property name; a name that matches must hold a string.
        schema = {"properties": properties,
                  "patternProperties": {catastrophic: {"type": "string"}}}
        bad, good = {"aaaa": 1}, {"a" * 40 + "!": 1}
    name = new_event_type(base_url, schema=_schema_with(schema), compatibility_mode="forward")
    response = post(base_url, name, [business_event(**bad)], timeout=10)
    assert response.status_code == 422, response.text
    assert response.json()[0]["publishing_status"] == "failed"
    assert post(base_url, name, [business_event(**good)], timeout=10).status_code == 200


@pytest.mark.parametrize("pattern", [r"^(a)\1$", r"^a(?=b)"])
def test_a_pattern_that_cannot_be_matched_in_linear_time_is_refused(base_url, pattern):
    schema = {"properties": {"code": {"type": "string", "pattern": pattern}}}
    response = requests.post(base_url + "/event-types", json={
        "name": "hostile.pattern", "owning_application": "order-service",
        "category": "undefined", "schema": _schema_with(schema)})
    detail = assert_problem(response, 422)["detail"]
    assert "#/properties/code/pattern" in detail and "linear time" in detail


# Inputs that passed the checks and then raised, as 500s (found by review, 2026-11-27).

@pytest.mark.parametrize(("schema", "detail"), [
    # Each reached the fallback validator's $ref handling with something it cannot follow.
    ({"properties": {"a": {"$ref": 5}}}, "$ref at #/properties/a must be a string"),
    ({"required": ["a"], "properties": {"a": {"$ref": "#/required"}}}, "not a schema"),
    ({"id": "http://[::1", "definitions": {"q": {}},
      "properties": {"a": {"$ref": "#/definitions/q"}}}, "the id at # is not a URI"),
    # re raises OverflowError, not re.error, for repetitions of 2**32 and more.
    ({"properties": {"a": {"type": "string", "pattern": "a{4294967296}"}}}, "#/properties/a"),
    ({"patternProperties": {"a{4294967296}": {}}}, "not a valid regular expression"),
    # json.loads read 1e999 as infinity; the enum then refused every event, naming [None].
    ({"properties": {"a": {"enum": ["x"]}}, "maximum": "1e999"}, "infinity"),
])
def test_schemas_a_validator_could_not_use_are_refused(base_url, schema, detail):
    text = json.dumps(schema).replace('"1e999"', "1e999")
    response = requests.post(base_url + "/event-types", json={
        "name": "hostile.schema", "owning_application": "order-service",
        "category": "undefined", "schema": {"type": "json_schema", "schema": text}})
    assert detail in assert_problem(response, 422)["detail"]
    assert requests.get(base_url + "/event-types/hostile.schema").status_code == 404


def test_a_schema_change_a_validator_could_not_use_is_refused_and_changes_nothing(base_url):
    name = new_event_type(base_url, compatibility_mode="forward")
    before = requests.get(f"{base_url}/event-types/{name}").json()
    changed = {**before, "schema": _schema_with(
        {"properties": {"order_number": {"type": "string"}, "b": {"$ref": 5}}})}
    assert_problem(requests.put(f"{base_url}/event-types/{name}", json=changed), 422)
    assert requests.get(f"{base_url}/event-types/{name}").json()["schema"] == before["schema"]
    assert post(base_url, name, [business_event(b=1)]).status_code == 200


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_an_event_nested_deeper_than_events_are_stored_fails_and_nothing_is_stored(
        base_url, event_type):
    events = [business_event(1, deep=nested(253)), business_event(2, deep=nested(254))]
    for event in events:
        event["metadata"]["partition"] = "1"
    before = requests.get(f"{base_url}/event-types/{event_type}/partitions/1").json()
    response = post(base_url, event_type, events)
    assert response.status_code == 422, response.text
    first, second = response.json()
    assert first["publishing_status"] == "aborted"
    assert second["publishing_status"] == "failed" and second["step"] == "publishing"
    assert "more than 254 levels" in second["detail"]
    after = requests.get(f"{base_url}/event-types/{event_type}/partitions/1").json()
    assert after["newest_available_offset"] == before["newest_available_offset"]
    assert post(base_url, event_type, events[:1]).status_code == 200


def test_hash_keys_and_regex_formats_that_raised_get_answers(base_url):
    name = new_event_type(base_url, partition_strategy="hash", partition_key_fields=["key"],
                          compatibility_mode="forward", schema=_schema_with(
                              {"properties": {"key": {}, "re": {"format": "regex"}}}))
    assert post(base_url, name, [business_event(key=10**20)]).status_code == 200
    response = post(base_url, name, [business_event(re="a{4294967296}")])
    assert response.status_code == 422, response.text
    assert response.json()[0]["step"] == "validating"
    assert "is not a 'regex'" in response.json()[0]["detail"]


@pytest.mark.parametrize(("path", "status"), [
    # Python's $ also matches before a last newline: these named "1.0.0" and "0".
    ("/schemas/1.0.0%0A", 404), ("/schemas/01.0.0", 404), ("/partitions/0%0A", 404),
    # Offsets past PostgreSQL's bigint: they reached the database.
    ("/schemas?offset=9223372036854775808", 400), ("/schemas?offset=" + "9" * 4000, 400),
])
def test_path_and_query_values_a_pattern_or_the_database_let_through(
        base_url, event_type, path, status):
    assert_problem(requests.get(f"{base_url}/event-types/{event_type}{path}"), status)
    assert requests.get(f"{base_url}/event-types/{event_type}/schemas/1.0.0").status_code == 200
