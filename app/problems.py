"""Errors as ``application/problem+json`` (RFC 7807), the only error format the API speaks."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus

from flask import Flask, Response, current_app, json
from gunicorn.http.errors import (
    ChunkMissingTerminator,
    InvalidChunkExtension,
    InvalidChunkSize,
    NoMoreData,
)
from werkzeug.exceptions import HTTPException, MethodNotAllowed, RequestEntityTooLarge

from app import lifecycle
from app.dependencies import RETRY_AFTER_S, DependencyUnavailable, unavailable_from

PROBLEM_TYPE = "http://httpstatus.es/{status}"
CONTENT_TYPE = "application/problem+json"
# What gunicorn raises while the application reads a body the client framed wrongly.
MALFORMED_BODY = (InvalidChunkSize, ChunkMissingTerminator, InvalidChunkExtension, NoMoreData)

log = logging.getLogger(__name__)


class Problem(Exception):
    """Raise to answer the request with a Problem; ``detail`` tells the caller what to fix."""

    def __init__(self, status: int, detail: str, title: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.title = title or HTTPStatus(status).phrase


def problem_response(status: int, detail: str, title: str | None = None,
                     extensions: Mapping[str, object] | None = None) -> Response:
    """A Problem; ``extensions`` are further members of it (RFC 7807 allows them)."""
    body = {
        "type": PROBLEM_TYPE.format(status=status),
        "title": title or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        **(extensions or {}),
    }
    response = Response(json.dumps(body), status=status, content_type=CONTENT_TYPE)
    if status == 503:
        # Every 503 is an outage the client should ride out, not a bug: say when to retry.
        response.headers["Retry-After"] = str(RETRY_AFTER_S)
    return response


def unavailable_response(error: DependencyUnavailable) -> Response:
    log.warning("answered 503: %s", error)
    return problem_response(503, f"{error}; try again later", "Service Unavailable")


def register_problem_handlers(app: Flask) -> None:
    @app.errorhandler(Problem)
    def _problem(error: Problem) -> Response:
        return problem_response(error.status, error.detail, error.title)

    @app.errorhandler(HTTPException)
    def _http_error(error: HTTPException) -> Response:
        detail = error.description or error.name
        if isinstance(error, RequestEntityTooLarge):
            limit = current_app.config["MAX_CONTENT_LENGTH"]
            detail = f"the request body is larger than {limit} bytes; send less at once"
        response = problem_response(error.code or 500, detail)
        if isinstance(error, MethodNotAllowed) and error.valid_methods:
            response.headers["Allow"] = ", ".join(error.valid_methods)
        return response

    def _malformed_body(error: Exception) -> Response:
        # The connection is closed: where the body ends is unknown, so a next request
        # on it would not be read (gunicorn closed it silently, and the client lost
        # the request it sent there).
        lifecycle.close_connection_after_response()
        return problem_response(400, f"the request body is malformed: {error}")

    for malformed in MALFORMED_BODY:
        app.register_error_handler(malformed, _malformed_body)

    app.register_error_handler(DependencyUnavailable, unavailable_response)

    @app.errorhandler(Exception)
    def _unexpected(error: Exception) -> Response:
        outage = unavailable_from(error)
        if outage is not None:
            return unavailable_response(outage)
        log.exception("unexpected failure")
        return problem_response(500, "The server failed to handle the request; it was logged.")
