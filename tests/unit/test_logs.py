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
