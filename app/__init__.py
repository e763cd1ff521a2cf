"""The Flask application: ``create_app()`` wires settings, services, errors and blueprints."""

from __future__ import annotations

import logging

from flask import Flask
from flask.json.provider import DefaultJSONProvider

from app.config import Settings
from app.flow_id import install_flow_id
from app.logs import configure_logging
from app.problems import register_problem_handlers
from app.repository.database import make_green
from app.services import Services


class _OrderedJSON(DefaultJSONProvider):
    """JSON bodies keep the key order the code builds them in (Nakadi's field order)."""

    sort_keys = False


def create_app(settings: Settings | None = None) -> Flask:
    settings = settings or Settings.from_env()
    configure_logging(settings.log_level)
    make_green()
    app = Flask(__name__)
    app.json = _OrderedJSON(app)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_batch_bytes
    app.extensions["nakadi"] = Services(settings)
    register_problem_handlers(app)
    install_flow_id(app, logging.getLogger("nakadi.access"))

    from app.api import cursor_operations, event_types, events, health, partitions, registry

    for module in (health, event_types, events, partitions, cursor_operations, registry):
        app.register_blueprint(module.blueprint)
    return app
