"""``/event-types`` and ``/event-types/{name}/schemas``: the event-type registry."""

from __future__ import annotations

import logging
import re
import uuid
from datetime import UTC, datetime

from flask import Blueprint, Response, jsonify, request

from app.api.params import int_param, pagination_links
from app.problems import Problem
from app.registry.effective_schema import VALIDATORS
from app.registry.errors import EventTypeInvalid
from app.registry.evolution import create_event_type, evolve_event_type
from app.registry.partitions import partition_count
from app.registry.schemas import dump_event_type, dump_schema_version
from app.registry.validation import check_event_type
from app.repository import event_types as repository
from app.services import services
from app.storage.engine import StorageError
from workers import topic_deletions

blueprint = Blueprint("event_types", __name__)
log = logging.getLogger(__name__)

VERSION = re.compile(r"^\d{1,9}\.\d{1,9}\.\d{1,9}$")


def _stored_or_404(name: str) -> dict:
    event_type = repository.get_event_type(services().pool, name)
    if event_type is None:
        raise Problem(404, f"EventType '{name}' does not exist.")
    return event_type


def _checked(body: object, stored: dict | None = None) -> dict:
    try:
        return check_event_type(body, services().settings.registry, stored)
    except EventTypeInvalid as invalid:
        raise Problem(422, invalid.detail) from None


@blueprint.get("/event-types")
def list_event_types() -> Response:
    return jsonify([dump_event_type(et) for et in repository.list_event_types(services().pool)])


@blueprint.post("/event-types")
def create() -> tuple[str, int]:
    current = services()
    requested = _checked(request.get_json())
    name = requested["name"]
    if repository.get_event_type(current.pool, name) is not None:
        raise Problem(409, f"EventType with name '{name}' already exists.", "Conflict")
    event_type = create_event_type(requested, datetime.now(UTC))
    partitions = partition_count(event_type.get("default_statistic"),
                                 current.settings.registry)
    storage_id = repository.default_storage_id(current.pool)
    engine = current.engines.get(storage_id)
    topic = str(uuid.uuid4())
    try:
        engine.create_topic(topic, partitions, event_type["options"]["retention_time"])
    except StorageError as error:
        log.error("creating topic for %s failed: %s", name, error)
        raise Problem(503, f"The storage '{storage_id}' could not create the topic for "
                           f"'{name}'; try again later.") from None
    try:
        repository.insert_event_type(current.pool, event_type, storage_id, topic, partitions)
    except repository.EventTypeExists:
        engine.delete_topic(topic)
        raise Problem(409, f"EventType with name '{name}' already exists.", "Conflict") from None
    except BaseException:
        engine.delete_topic(topic)
        raise
    return "", 201


@blueprint.get("/event-types/<name>")
def get(name: str) -> Response:
    return jsonify(dump_event_type(_stored_or_404(name)))


@blueprint.put("/event-types/<name>")
def update(name: str) -> tuple[str, int]:
    stored = _stored_or_404(name)
    body = request.get_json()
    if isinstance(body, dict) and body.get("name", name) != name:
        raise Problem(422, f"name: the body names '{body.get('name')}' but the path '{name}'; "
                           "an event type cannot be renamed")
    evolution = evolve_event_type(stored, _checked(body, stored), datetime.now(UTC))
    if evolution.refused:
        raise Problem(422, EventTypeInvalid(evolution.refusals).detail)
    if evolution.changed:
        repository.update_event_type(services().pool, evolution.event_type,
                                     evolution.new_schema_version)
    return "", 200


@blueprint.delete("/event-types/<name>")
def delete(name: str) -> tuple[str, int]:
    current = services()
    _stored_or_404(name)
    try:
        timelines = repository.delete_event_type(current.pool, name, topic_deletions.DELAY_S)
    except repository.EventTypeInUse as in_use:
        raise Problem(422, str(in_use)) from None
    VALIDATORS.forget(name)
    topic_deletions.delete_later(current, timelines)
    return "", 200


@blueprint.get("/event-types/<name>/schemas")
def list_schemas(name: str) -> Response:
    _stored_or_404(name)
    limit = int_param("limit", 20, 1, 1000)
    offset = int_param("offset", 0, 0)
    versions, total = repository.schema_versions(services().pool, name, offset, limit)
    links = pagination_links(offset, limit, offset + limit < total)
    return jsonify({"_links": links, "items": [dump_schema_version(v) for v in versions]})


@blueprint.get("/event-types/<name>/schemas/<version>")
def get_schema(name: str, version: str) -> Response:
    event_type = _stored_or_404(name)
    if version == "latest":
        return jsonify(dump_schema_version(event_type["schema"]))
    found = None
    if VERSION.match(version):
        found = repository.schema_version(services().pool, name, version)
    if found is None:
        raise Problem(404, f"EventType '{name}' has no schema version {version}.")
    return jsonify(dump_schema_version(found))
