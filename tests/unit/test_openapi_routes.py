"""The API definition served at /openapi.json is a valid OpenAPI document and names
exactly the routes the app serves, with their methods and path parameters: a route
added without its documentation (or documentation without a route) fails here."""

from __future__ import annotations

import re

import orjson
import yaml
from openapi_spec_validator import validate

from app import create_app
from app.api.openapi import DOCUMENT, openapi_json
from app.config import Settings

METHODS = {"get", "put", "post", "delete", "patch"}


def document() -> dict:
    return yaml.safe_load(DOCUMENT.read_text())


def routes() -> dict[tuple[str, str], set[str]]:
    """(path in OpenAPI form, method) -> the path's parameter names, for every route."""
    app = create_app(Settings(database_url="postgresql://nobody@127.0.0.1:1/none",
                              zookeeper="127.0.0.1:1"))
    found = {}
    for rule in app.url_map.iter_rules():
        path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            found[(path, method.lower())] = set(rule.arguments)
    return found


def documented() -> dict[tuple[str, str], set[str]]:
    """(path, method) -> the path parameters the document declares for it."""
    doc = document()
    found = {}
    for path, item in doc["paths"].items():
        for method in METHODS & set(item):
            parameters = [*item.get("parameters", []), *item[method].get("parameters", [])]
            names = set()
            for parameter in parameters:
                if "$ref" in parameter:
                    parameter = doc["components"]["parameters"][parameter["$ref"].split("/")[-1]]
                if parameter["in"] == "path":
                    names.add(parameter["name"])
            found[(path, method)] = names
    return found


def test_the_document_is_valid_openapi():
    validate(document())


def test_every_route_is_documented_and_every_documented_path_is_a_route():
    served, described = routes(), documented()
    assert sorted(set(served) - set(described)) == [], "routes missing from openapi.yaml"
    assert sorted(set(described) - set(served)) == [], "openapi.yaml paths no route serves"


def test_path_parameters_are_the_routes_own():
    served, described = routes(), documented()
    for key, names in served.items():
        assert described[key] == names, key
        assert set(re.findall(r"{(\w+)}", key[0])) == names


def test_the_served_json_is_the_document():
    assert orjson.loads(openapi_json()) == document()
