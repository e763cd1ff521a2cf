"""``/event-types/{name}/timelines``: moving an event type to another storage
(POST) and its timelines so far (GET). Nakadi administrators only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Blueprint, Response, jsonify

from app.api.body import json_body
from app.coordination.timeline_switch import SwitchRefused, SwitchTimedOut
from app.domain.security import AdminPermission
from app.problems import Problem
from app.registry import timelines as operations
from app.registry.timestamps import rfc3339
from app.repository.event_types import get_event_type
from app.repository.timelines import TimelineConflict, TimelineRecord, list_timelines
from app.security.guard import needs_scope, require_admin
from app.security.scopes import Scope
from app.services import services
from app.storage.offsets import encode_offset

blueprint = Blueprint("timelines", __name__)


def _view(record: TimelineRecord) -> dict[str, Any]:
    timeline = record.timeline
    view: dict[str, Any] = {
        "id": timeline.id, "event_type": timeline.event_type, "order": timeline.order,
        "storage_id": timeline.storage_id, "topic": timeline.topic,
        "created_at": rfc3339(record.created_at),
    }
    if record.switched_at is not None:
        view["switched_at"] = rfc3339(record.switched_at)
    if record.cleaned_up_at is not None:
        view["cleaned_up_at"] = rfc3339(record.cleaned_up_at)
    if timeline.last_offsets is not None:
        # The offset of the last event of each partition (-1: it had none).
        view["latest_position"] = {str(p): encode_offset(timeline.order, last)
                                   for p, last in enumerate(timeline.last_offsets)}
    return view


@blueprint.get("/event-types/<name>/timelines")
@needs_scope(Scope.CONFIG)
def get_timelines(name: str) -> Response:
    require_admin(AdminPermission.READ)
    records = list_timelines(services().pool, name)
    if not records:
        raise Problem(404, f"EventType '{name}' does not exist.")
    return jsonify([_view(record) for record in records])


def _storage_id(body: Any) -> str:
    if not isinstance(body, Mapping):
        raise Problem(422, 'the body must be an object {"storage_id": "..."}')
    storage_id = body.get("storage_id")
    if not isinstance(storage_id, str) or not storage_id:
        raise Problem(422, "storage_id: is required: the id of the storage to move the "
                           "event type to (see GET /storages)")
    return storage_id


@blueprint.post("/event-types/<name>/timelines")
@needs_scope(Scope.CONFIG)
def create_timeline(name: str) -> Response:
    require_admin(AdminPermission.WRITE)
    current = services()
    if get_event_type(current.pool, name) is None:
        raise Problem(404, f"EventType '{name}' does not exist.")
    storage_id = _storage_id(json_body())
    try:
        operations.create_timeline(current, name, storage_id)
    except operations.EventTypeNotFound as error:
        raise Problem(404, str(error)) from None
    except operations.TimelineRefused as error:
        raise Problem(422, str(error)) from None
    except (SwitchRefused, TimelineConflict) as error:
        raise Problem(409, str(error)) from None
    except (SwitchTimedOut, operations.TopicNotCreated) as error:
        raise Problem(503, str(error)) from None
    response = jsonify(_view(list_timelines(current.pool, name)[-1]))
    response.status_code = 201
    return response
