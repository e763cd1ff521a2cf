"""Error answers of the Flask application, through its test client on the real stack."""

from __future__ import annotations

import dataclasses
import json

import pytest
from flask import request

from app import create_app
from app.config import Settings
from deploy.localstack import free_port


@pytest.fixture
def app(settings: Settings):
    app = create_app(settings)

    @app.post("/test-json")
    def echo_json():
        return {"got": request.get_json()}

    @app.get("/test-crash")
    def crash():
        raise RuntimeError("secret internals")

    yield app
    app.extensions["nakadi"].close()


def test_unexpected_failure_is_a_500_problem_logged_with_the_flow_id(capsys, app):
    response = app.test_client().get("/test-crash", headers={"X-Flow-Id": "crash-flow"})
    assert response.status_code == 500
    assert response.content_type == "application/problem+json"
    assert "secret internals" not in response.get_data(as_text=True)
    assert response.headers["X-Flow-Id"] == "crash-flow"
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    logged = next(line for line in lines if line["logger"] == "app.problems")
    assert logged["flow_id"] == "crash-flow"
    assert logged["level"] == "ERROR"
    assert "secret internals" in logged["exception"]


def test_malformed_json_is_a_400_problem(app):
    response = app.test_client().post(
        "/test-json", data="{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.content_type == "application/problem+json"
    assert response.json["detail"]


def test_wrong_content_type_is_a_415_problem(app):
    response = app.test_client().post("/test-json", data="a=b", content_type="text/plain")
    assert response.status_code == 415
    assert response.content_type == "application/problem+json"
    assert "application/json" in response.json["detail"]


def test_health_is_503_naming_what_is_down(settings: Settings):
    dead = free_port()
    app = create_app(dataclasses.replace(settings, zookeeper=f"127.0.0.1:{dead}"))
    try:
        response = app.test_client().get("/health")
    finally:
        app.extensions["nakadi"].close()
    assert response.status_code == 503
    assert response.content_type == "application/problem+json"
    assert response.json["detail"].startswith("zookeeper is down")
    assert "postgresql" not in response.json["detail"]
