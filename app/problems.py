"""Errors as ``application/problem+json`` (RFC 7807), the only error format the API speaks."""

from __future__ import annotations

import logging
from http import HTTPStatus

from flask import Flask, Response, current_app, json
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

PROBLEM_TYPE = "http://httpstatus.es/{status}"
CONTENT_TYPE = "application/problem+json"

log = logging.getLogger(__name__)


class Problem(Exception):
    """Raise to answer the request with a Problem; ``detail`` tells the caller what to fix."""

    def __init__(self, status: int, detail: str, title: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.title = title or HTTPStatus(status).phrase


def problem_response(status: int, detail: str, title: str | None = None) -> Response:
    body = {
        "type": PROBLEM_TYPE.format(status=status),
        "title": title or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
    }
    return Response(json.dumps(body), status=status, content_type=CONTENT_TYPE)


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
        if error.code == 405 and error.valid_methods:
            response.headers["Allow"] = ", ".join(error.valid_methods)
        return response

    @app.errorhandler(Exception)
    def _unexpected(error: Exception) -> Response:
        log.exception("unexpected failure")
        return problem_response(500, "The server failed to handle the request; it was logged.")
