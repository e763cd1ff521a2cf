"""Logging as one JSON object per line, with the flow id of the request."""

from __future__ import annotations

import json
import logging
import sys
import time
from types import TracebackType
from typing import TYPE_CHECKING

import gevent
import orjson
from flask import has_app_context
from gunicorn import glogging

from app.current import current_globals

if TYPE_CHECKING:
    from gunicorn.config import Config

STANDARD_ATTRIBUTES = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """Each record as one JSON object. Every request writes its access line through
    here, so the line costs little: orjson writes it (the standard library's
    ``json`` only for what orjson refuses, such as integers past 64 bits, and for
    lines with non-ASCII text, which it escapes, so that every line stays ASCII
    whatever stderr's encoding), and the time's seconds are formatted once a
    second."""

    def __init__(self) -> None:
        super().__init__()
        self._second = -1
        self._second_text = ""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self._time(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if has_app_context():
            context = current_globals()
            flow_id, subject = context.get("flow_id"), context.get("subject")
            if flow_id:
                entry["flow_id"] = flow_id
            if subject is not None:  # who, never their token
                entry["subject"] = str(subject)
        for key, value in vars(record).items():
            if key not in STANDARD_ATTRIBUTES and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        try:
            line = orjson.dumps(entry, default=str).decode()
            if line.isascii():
                return line
        except orjson.JSONEncodeError:
            pass
        # What orjson refuses, and text past ASCII, escaped: the same compact line.
        return json.dumps(entry, default=str, separators=(",", ":"))

    def _time(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        if second != self._second:  # formatters run under their handler's lock
            self._second_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = second
        return f"{self._second_text}.{int(record.msecs):03d}Z"


class StderrHandler(logging.StreamHandler):
    """Writes to the ``sys.stderr`` of the moment, which test capture may have swapped."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def _json_lines_to_stderr() -> logging.Handler:
    handler = StderrHandler()
    handler.setFormatter(JsonFormatter())
    return handler


def configure_logging(level: str) -> None:
    """Send every logger's records to stderr as JSON lines."""
    root = logging.getLogger()
    root.handlers[:] = [_json_lines_to_stderr()]
    root.setLevel(level.upper())
    # The lines name no source line, thread or process: spare every record looking
    # them up (the logging HOWTO's "Optimization"; ~2 us of a request's access line).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    # kazoo logs every connection state change at INFO; keep its warnings.
    logging.getLogger("kazoo").setLevel(max(logging.WARNING, root.level))


def log_greenlet_failures() -> None:
    """Have this thread's gevent hub log an exception no greenlet caught as a JSON line,
    traceback included; gevent itself prints it to stderr, between the JSON lines."""
    log = logging.getLogger("gevent")

    def print_exception(context: object | None, t: type[BaseException] | None,
                        v: BaseException | str | None, tb: TracebackType | None) -> None:
        if t is not None and isinstance(v, BaseException):
            log.error("uncaught in %r", context, exc_info=(t, v, tb))
        else:
            log.error("uncaught in %r: %s", context, v)

    # gevent's documented way to change how its hub reports errors
    gevent.get_hub().print_exception = print_exception  # type: ignore[method-assign]


class GunicornLogger(glogging.Logger):
    """gunicorn's own log as JSON lines. No access log: the application writes one
    line per request itself, with the flow id."""

    def setup(self, cfg: Config) -> None:
        super().setup(cfg)
        self.error_log.handlers[:] = [_json_lines_to_stderr()]

    def access(self, resp: object, req: object, environ: object, request_time: object
               ) -> None:
        return None
