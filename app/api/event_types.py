"""``/event-types`` and ``/event-types/{name}/schemas``: the event-type registry."""

from __future__ import annotations

import re

from flask import Blueprint, Response, jsonify

from app.api.body import json_body
from app.api.lookups import event_type_or_404
from app.api.params import MAX_OFFSET, int_param, pagination_links
from app.domain.event_type_document import event_type_document, schema_document
from app.domain.security import Feature
from app.problems import Problem, problem_response
from app.registry import operations
from app.registry.errors import EventTypeInvalid
from app.repository import event_types as repository
from app.security.guard import (
    feature_enabled,
    needs_scope,
    require_admin_for_kpi_names,
    require_event_type,
    require_feature_off,
)
from app.security.policy import Operation
from app.security.scopes import Scope
from app.services import services

blueprint = Blueprint("event_types", __name__)

VERSION = re.compile(r"(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})")


@blueprint.errorhandler(EventTypeInvalid)
def _invalid(error: EventTypeInvalid) -> Response:
    return problem_response(422, error.detail)


@blueprint.errorhandler(operations.EventTypeNameTaken)
def _name_taken(error: operations.EventTypeNameTaken) -> Response:
    return problem_response(409, str(error), "Conflict")


@blueprint.errorhandler(operations.EventTypeDeleted)
def _deleted(error: operations.EventTypeDeleted) -> Response:
    return problem_response(404, str(error))


@blueprint.errorhandler(operations.EventTypeBusy)
def _busy(error: operations.EventTypeBusy) -> Response:
    return problem_response(409, str(error), "Conflict")


@blueprint.errorhandler(operations.TopicNotCreated)
@blueprint.errorhandler(operations.RetentionNotChanged)
def _storage_failed(error: Exception) -> Response:
    return problem_response(503, str(error))


@blueprint.get("/event-types")
def list_event_types() -> Response:
    return jsonify([event_type_document(et) for et in repository.list_event_types(services().pool)])


@blueprint.post("/event-types")
@needs_scope(Scope.EVENT_TYPES)
def create() -> tuple[str, int]:
    require_feature_off(Feature.DISABLE_EVENT_TYPE_CREATION,
                        "Creating event types is disabled for now; try again later.")
    body = json_body()
    if isinstance(body, dict) and isinstance(body.get("name"), str):
        require_admin_for_kpi_names(body["name"])
    created = operations.create(services(), body)
    services().kpis.event_type_logged(created, "created")
    return "", 201


@blueprint.get("/event-types/<name>")
def get(name: str) -> Response:
    event_type, _ = event_type_or_404(name, fresh=True)
    return jsonify(event_type_document(event_type))


@blueprint.put("/event-types/<name>")
@needs_scope(Scope.EVENT_TYPES)
def update(name: str) -> tuple[str, int]:
    stored, _ = event_type_or_404(name, fresh=True)
    require_event_type(stored, Operation.ADMIN)
    require_admin_for_kpi_names(name)
    updated = operations.update(services(), stored, json_body())
    services().kpis.event_type_logged(updated, "updated")
    return "", 200


@blueprint.delete("/event-types/<name>")
@needs_scope(Scope.CONFIG)
def delete(name: str) -> tuple[str, int]:
    stored, _ = event_type_or_404(name, fresh=True)
    require_event_type(stored, Operation.ADMIN)
    require_admin_for_kpi_names(name)
    require_feature_off(Feature.DISABLE_EVENT_TYPE_DELETION,
                        "Deleting event types is disabled for now; try again later.")
    try:
        operations.delete(services(), name,
                          feature_enabled(Feature.DELETE_EVENT_TYPE_WITH_SUBSCRIPTIONS))
    except repository.EventTypeInUse as in_use:
        raise Problem(422, str(in_use)) from None
    services().kpis.event_type_logged(stored, "deleted")
    return "", 200


@blueprint.get("/event-types/<name>/schemas")
def list_schemas(name: str) -> Response:
    event_type_or_404(name, fresh=True)
    limit = int_param("limit", 20, 1, 1000)
    offset = int_param("offset", 0, 0, MAX_OFFSET)
    versions, total = repository.schema_versions(services().pool, name, offset, limit)
    links = pagination_links(offset, limit, offset + limit < total)
    return jsonify({"_links": links, "items": [schema_document(v) for v in versions]})


@blueprint.post("/event-types/<name>/schemas")
@needs_scope(Scope.EVENT_TYPES)
def add_schema(name: str) -> tuple[str, int]:
    stored, _ = event_type_or_404(name, fresh=True)
    require_event_type(stored, Operation.ADMIN)
    require_admin_for_kpi_names(name)
    updated = operations.add_schema(services(), stored, json_body())
    services().kpis.event_type_logged(updated, "updated")
    return "", 200


@blueprint.get("/event-types/<name>/schemas/<version>")
def get_schema(name: str, version: str) -> Response:
    event_type, _ = event_type_or_404(name, fresh=True)
    if version == "latest":
        return jsonify(schema_document(event_type.schema))
    found = None
    if VERSION.fullmatch(version):
        found = repository.schema_version(services().pool, name, version)
    if found is None:
        raise Problem(404, f"EventType '{name}' has no schema version {version}.")
    return jsonify(schema_document(found))
