"""The pipeline's HTTP side without a broker: tokens, errors, offset options and
the arithmetic it does itself (a mocked URL, the way third-party HTTP is tested)."""

from __future__ import annotations

import pytest
import responses

from workers.pipeline.archiver import _one_line, arguments, event_types
from workers.pipeline.client import BrokerClient, BrokerError, parse_line
from workers.pipeline.ranges import following_offsets, parse_offsets, share
from workers.pipeline.source import SourceOptions

URL = "http://nakadi.example:8080"
EVENT_TYPE = {"name": "orders", "category": "undefined",
              "schema": {"type": "json_schema", "schema": '{"properties": {}}'}}


@responses.activate
def test_the_token_option_is_sent_as_a_bearer_token():
    call = responses.get(f"{URL}/event-types/orders", json=EVENT_TYPE)
    SourceOptions.parse({"url": URL, "event_type": "orders", "token": "t0k3n"}).layout()
    assert call.calls[0].request.headers["Authorization"] == "Bearer t0k3n"


@responses.activate
def test_the_token_file_is_read_at_every_request(tmp_path):
    call = responses.get(f"{URL}/event-types/orders", json=EVENT_TYPE)
    token_file = tmp_path / "token"
    token_file.write_text("first\n")
    client = BrokerClient(URL, token_file=str(token_file))
    client.event_type("orders")
    token_file.write_text("rotated\n")
    client.event_type("orders")
    assert [c.request.headers["Authorization"] for c in call.calls] == [
        "Bearer first", "Bearer rotated"]


@responses.activate
def test_without_a_token_no_authorization_header_is_sent():
    call = responses.get(f"{URL}/event-types/orders", json=EVENT_TYPE)
    BrokerClient(URL).event_type("orders")
    assert "Authorization" not in call.calls[0].request.headers


@responses.activate
def test_a_refused_token_says_to_give_a_valid_one():
    responses.get(f"{URL}/event-types/orders", status=401, content_type="application/problem+json",
                  json={"type": "x", "title": "Unauthorized", "status": 401,
                        "detail": "the token is expired"})
    with pytest.raises(BrokerError, match="401: the token is expired; give a valid token"):
        BrokerClient(URL, token="old").event_type("orders")


def test_a_missing_token_file_is_named():
    with pytest.raises(BrokerError, match="cannot read the token file /nonexistent/token"):
        BrokerClient(URL, token_file="/nonexistent/token").event_type("orders")


@pytest.mark.parametrize("url", ["", "localhost:8080", "ftp://host", "http://"])
def test_a_url_that_is_not_http_is_refused_with_an_example(url):
    with pytest.raises(BrokerError, match="is not an http:// or https:// URL"):
        BrokerClient(url)


@pytest.mark.parametrize("options", [
    {"event_type": "orders"},
    {"url": URL},
    {"url": URL, "event_type": "orders", "raw": "yes"},
    {"url": URL, "event_type": "orders", "maxEventsPerTrigger": "0"},
    {"url": URL, "event_type": "orders", "startingOffsets": "first"},
    {"url": URL, "event_type": "orders", "endingOffsets": '{"0": 5}'},
], ids=repr)
def test_bad_options_are_named(options):
    with pytest.raises(BrokerError):
        SourceOptions.parse(options)


def test_offsets_options_take_keywords_maps_and_cursor_lists():
    assert parse_offsets(None, "earliest", "x") == "earliest"
    assert parse_offsets(" LATEST ", "earliest", "x") == "latest"
    assert parse_offsets('{"0": "001-0001--1"}', "latest", "x") == {"0": "001-0001--1"}
    assert parse_offsets('[{"partition": "1", "offset": "earliest"}]', "latest", "x") == {
        "1": "earliest"}


def test_fair_share_serves_small_backlogs_whole_and_splits_the_rest():
    assert share({"0": 10, "1": 1000, "2": 1000}, 310) == {"0": 10, "1": 150, "2": 150}
    assert share({"0": 3, "1": 4}, None) == {"0": 3, "1": 4}
    assert sum(share({"0": 7, "1": 7, "2": 7}, 10).values()) <= 10


def test_offsets_inside_a_batch_follow_from_its_cursor_only_when_the_arithmetic_holds():
    assert following_offsets("001-0001--1", "001-0001-000000000000000002", 3).to_pylist() == [
        "001-0001-000000000000000000", "001-0001-000000000000000001",
        "001-0001-000000000000000002"]
    assert following_offsets("001-0001-000000000000000005", "001-0002-000000000000000001",
                             2) is None
    assert following_offsets("001-0001-000000000000000005", "001-0001-000000000000000009",
                             2) is None
    assert following_offsets("a", "b", 1) is None


def test_exact_parsing_keeps_integers_beyond_64_bits():
    line = b'{"events": [{"n": 123456789012345678901234567890}]}'
    assert parse_line(line, exact=True)["events"][0]["n"] == 123456789012345678901234567890
    assert parse_line(b'{"n": 1234567890123456789}', exact=True)["n"] == 1234567890123456789


@responses.activate
def test_all_event_types_are_listed_and_each_checked_before_spark_starts():
    responses.get(f"{URL}/event-types", json=[{"name": "a"}, {"name": "b"}])
    checked = [responses.get(f"{URL}/event-types/{name}", json=EVENT_TYPE) for name in "ab"]
    args = arguments(["--url", URL, "--all-event-types", "--output", "o", "--checkpoint", "c"])
    assert event_types(args, BrokerClient(URL)) == ["a", "b"]
    assert all(call.call_count == 1 for call in checked)


@responses.activate
def test_a_stream_refused_while_the_partitions_slots_are_taken_is_asked_again(monkeypatch):
    monkeypatch.setattr("workers.pipeline.client.BUSY_PAUSE_S", 0)
    url = f"{URL}/event-types/orders/events"
    responses.get(url, status=429, json={"detail": "partition 0 already has 3 streams"})
    responses.get(url, body=b'{"cursor": {"partition": "0", "offset": "5"}, "events": [{}]}\n')
    [line] = BrokerClient(URL).stream("orders", "0", "4", 1)
    assert line.offset == "5" and len(responses.calls) == 2


# What a query whose foreachBatch raised reports: the JVM's error wrapping the Python
# worker's traceback (from an archiver's log, shortened).
FOREACH_BATCH_FAILURE = """\
org.apache.spark.sql.execution.streaming.sources.ForeachBatchUserFuncException: \
[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in \
foreach batch sink. Reason: An exception was raised by the Python Proxy. Return Message: \
Traceback (most recent call last):
  File "/srv/.venv/lib/python3.11/site-packages/py4j/clientserver.py", line 644, in _call_proxy
    return_value = getattr(self.pool[obj_id], method)(*params)
                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/srv/workers/pipeline/lake.py", line 50, in with_date
    return frame.withColumn("date", day).drop("event_type")
  File "/srv/.venv/lib/python3.11/site-packages/pyspark/errors/exceptions/captured.py", \
line 262, in deco
    raise converted from None
pyspark.errors.exceptions.captured.AnalysisException: [INVALID_EXTRACT_BASE_FIELD_TYPE] \
Can't extract a value from "metadata". SQLSTATE: 42000
 SQLSTATE: 39000
\tat org.apache.spark.sql.execution.streaming.sources.ForeachBatchSink.callBatchWriter(\
ForeachBatchSink.scala:60)
"""


def test_an_error_raised_in_foreach_batch_is_reported_as_its_exception_line():
    assert _one_line(RuntimeError(FOREACH_BATCH_FAILURE)) == (
        'AnalysisException: [INVALID_EXTRACT_BASE_FIELD_TYPE] Can\'t extract a value from '
        '"metadata". SQLSTATE: 42000')
    assert _one_line(RuntimeError("workers.pipeline.client.BrokerError: the broker is gone\n"
                                  "\tat x")) == "the broker is gone"
    assert _one_line(RuntimeError("plain\nsecond")) == "plain"
