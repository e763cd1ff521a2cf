"""``X-Flow-Id``: taken from the request or generated, logged, and returned."""

from __future__ import annotations

import logging
import secrets
import time

from flask import Flask, Response

from app.current import current_globals, current_request

HEADER = "X-Flow-Id"
MAX_LENGTH = 255


def new_flow_id() -> str:
    return secrets.token_urlsafe(18)


def install_flow_id(app: Flask, access_log: logging.Logger) -> None:
    @app.before_request
    def _take_flow_id() -> None:
        given = current_request().headers.get(HEADER, "").strip()
        context = current_globals()
        context.flow_id = given[:MAX_LENGTH] if given else new_flow_id()
        context.started = time.perf_counter()

    @app.after_request
    def _return_flow_id(response: Response) -> Response:
        context = current_globals()
        flow_id = context.get("flow_id")
        if flow_id:
            response.headers[HEADER] = flow_id
        if "started" in context and access_log.isEnabledFor(logging.INFO):
            asked = current_request()
            access_log.info(
                "%s %s %s", asked.method, asked.path, response.status_code,
                extra={"duration_ms": round((time.perf_counter() - context.started) * 1000, 2)},
            )
        return response
