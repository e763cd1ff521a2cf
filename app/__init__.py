"""The Flask application: ``create_app()`` wires settings, services, errors and blueprints."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from flask import Flask, Response

from app import lifecycle
from app.config import Settings
from app.flow_id import install_flow_id
from app.input_guard import install_input_guard
from app.logs import configure_logging
from app.monitoring import recording
from app.problems import register_problem_handlers
from app.repository.database import make_green
from app.security.guard import install_authentication
from app.send_timeout import install_send_timeout
from app.services import Services


class BrokerApp(Flask):
    """Flask, minus its check for coroutine functions: Flask asks, for every hook and
    view of every request, whether the function is async (~1 us a call, nine calls a
    publish request), and the broker has none."""

    def ensure_sync(self, func: Callable[..., Any]) -> Callable[..., Any]:
        return func


def create_app(settings: Settings | None = None) -> Flask:
    settings = settings or Settings.from_env()
    configure_logging(settings.log_level)
    make_green()
    app = BrokerApp(__name__, static_folder=None)  # it serves no files
    # A trailing slash reaches the same endpoint, as Nakadi's Spring routing let it
    # (clients that join a base URL and a path often add one).
    app.url_map.strict_slashes = False
    app.config["MAX_CONTENT_LENGTH"] = settings.max_batch_bytes
    app.config["MAX_BODY_BYTES"] = settings.max_body_bytes
    app.config["REQUEST_BODY_TIMEOUT_S"] = settings.request_body_timeout_s
    app.config["RESPONSE_SEND_TIMEOUT_S"] = settings.response_send_timeout_s
    app.extensions["nakadi"] = Services(settings)
    recording.configure(settings.metrics_enabled)
    install_send_timeout(app)  # first: its hook runs last
    register_problem_handlers(app)
    install_flow_id(app, logging.getLogger("nakadi.access"))
    install_input_guard(app)
    install_authentication(app)

    from app.api import (
        cursor_operations,
        event_types,
        events,
        health,
        monitoring,
        openapi,
        partitions,
        registry,
        storages,
        subscription_cursors,
        subscription_events,
        subscription_stats,
        subscriptions,
        timelines,
    )
    from app.api import settings as settings_api

    for module in (health, openapi, event_types, events, partitions, cursor_operations, registry,
                   subscriptions, subscription_events, subscription_cursors, subscription_stats,
                   settings_api, storages, timelines, monitoring):
        app.register_blueprint(module.blueprint)
    app.after_request(_no_type_without_body)
    app.after_request(lifecycle.close_connection_when_shutting_down)
    return app


def _no_type_without_body(response: Response) -> Response:
    """A response without a body names no type (Flask would say text/html)."""
    if not response.is_streamed and not response.get_data():
        del response.headers["Content-Type"]
    return response
