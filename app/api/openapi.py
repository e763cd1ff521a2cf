"""``GET /openapi.json``: the API definition of this broker (``openapi.yaml`` beside
this module), kept equal to the routes by tests/unit/test_openapi_routes.py."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import orjson
import yaml
from flask import Blueprint, Response

blueprint = Blueprint("openapi", __name__)

DOCUMENT = Path(__file__).with_name("openapi.yaml")


@cache
def openapi_json() -> bytes:
    """The document as JSON, read once per process."""
    return orjson.dumps(yaml.safe_load(DOCUMENT.read_text()))


@blueprint.get("/openapi.json")
def openapi() -> Response:
    return Response(openapi_json(), content_type="application/json")
