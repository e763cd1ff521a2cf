"""The log as operators' collectors read it: one JSON object per line."""

from __future__ import annotations

import json
import logging

import gevent
import pytest

from app.logs import JsonFormatter, log_greenlet_failures


@pytest.fixture
def hub_logging():
    hub = gevent.get_hub()
    log_greenlet_failures()
    yield
    del hub.print_exception  # back to gevent's own


def test_an_exception_no_greenlet_caught_is_a_json_line_with_its_traceback(
        hub_logging, caplog, capfd):
    def fail() -> None:
        raise ValueError("the sweep broke")

    with caplog.at_level(logging.ERROR, logger="gevent"):
        gevent.spawn(fail).join()
    # Nothing raw on stderr: at most the record itself, where logging is set up.
    assert all(json.loads(line) for line in capfd.readouterr().err.splitlines())
    [record] = caplog.records
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "ERROR" and "fail" in line["message"]
    assert "ValueError: the sweep broke" in line["exception"]


def _record(message: str, created: float = 1_764_367_623.25, **extra: object
            ) -> logging.LogRecord:
    record = logging.makeLogRecord({"name": "nakadi.access", "levelno": logging.INFO,
                                    "levelname": "INFO", "msg": message, **extra})
    record.created, record.msecs = created, (created - int(created)) * 1000
    return record


def test_a_line_carries_the_time_in_utc_to_the_millisecond_and_each_extra_field():
    formatter = JsonFormatter()
    line = json.loads(formatter.format(_record("POST /x 200", duration_ms=1.5)))
    assert line == {"time": "2025-11-28T22:07:03.250Z", "level": "INFO",
                    "logger": "nakadi.access", "message": "POST /x 200", "duration_ms": 1.5}
    # The seconds are kept between records: a record of the next second must not reuse them.
    assert json.loads(formatter.format(_record("b", 1_764_367_624.5)))["time"] == \
        "2025-11-28T22:07:04.500Z"
    assert json.loads(formatter.format(_record("c", 1_764_367_623.75)))["time"] == \
        "2025-11-28T22:07:03.750Z"


def test_non_ascii_text_is_escaped_so_every_line_is_ascii_and_as_compact():
    formatter = JsonFormatter()
    text = formatter.format(_record("event type 'größe' not found"))
    assert text.isascii()
    assert json.loads(text)["message"] == "event type 'größe' not found"
    # The escaping writer's line reads like the usual one, but for the escapes.
    usual = formatter.format(_record("event type 'grosse' not found"))
    assert text.replace("\\u00f6\\u00df", "oss") == usual


def test_what_the_fast_encoder_refuses_is_still_written():
    class Opaque:
        def __str__(self) -> str:
            return "opaque"

    line = json.loads(JsonFormatter().format(_record("m", offset=2**70, thing=Opaque(),
                                                     counts={1: "one"})))
    assert line["offset"] == 2**70
    assert line["thing"] == "opaque"
    assert line["counts"] == {"1": "one"}
