"""``/event-types/{name}/cursor-distances``, ``/cursors-lag`` and ``/shifted-cursors``.

Positions are consecutive integers in every partition, through all timelines of
the event type, so distances and shifts are arithmetic on them; the bounds only
say which positions exist.
Every cursor must lie within the available events or just before the oldest
one (``begin``), as for streams. Errors name the body item as ``body[i]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from flask import Blueprint, Response, jsonify

from app.api.body import json_body
from app.api.lookups import event_type_or_404, partition_bounds
from app.api.partitions import partition_view
from app.cursors import CursorInvalid, client_cursor, describe, resolve
from app.domain.cursor import Position
from app.domain.timeline import Timelines
from app.problems import Problem
from app.security.guard import needs_scope, require_event_type
from app.security.policy import Operation
from app.security.scopes import Scope
from app.storage.engine import PartitionBounds

blueprint = Blueprint("cursor_operations", __name__)


def _json_array(what: str) -> list[Any]:
    """The request body, which must be a JSON array of ``what``."""
    body = json_body()
    if not isinstance(body, list):
        raise Problem(422, f"the body must be a JSON array of {what}")
    return body


def _object(item: Any, index: int, fields: str) -> Mapping[str, Any]:
    if not isinstance(item, Mapping):
        raise Problem(422, f"body[{index}] must be an object with {fields}")
    return item


def _resolved(cursor: Any, where: str, timeline: Timelines,
              bounds: Mapping[int, PartitionBounds]) -> Position:
    try:
        return resolve(cursor, timeline, bounds)
    except CursorInvalid as error:
        raise Problem(422, f"{where}: {error}") from None


def _readable_timeline(name: str) -> Timelines:
    """The event type's timelines, if the caller may read the event type."""
    event_type, timeline = event_type_or_404(name)
    require_event_type(event_type, Operation.READ)
    return timeline


def _as_sent(cursor: Mapping[str, Any]) -> dict[str, Any]:
    return {"partition": cursor["partition"], "offset": cursor["offset"]}


@blueprint.post("/event-types/<name>/cursor-distances")
@needs_scope(Scope.READ)
def cursor_distances(name: str) -> Response:
    """``final - initial`` per pair: the events after the initial cursor up to and
    including the final one; negative when the final cursor is the earlier one."""
    timeline = _readable_timeline(name)
    queries = _json_array("objects with initial_cursor and final_cursor")
    bounds = partition_bounds(timeline)
    results = []
    for index, item in enumerate(queries):
        query = _object(item, index, "initial_cursor and final_cursor")
        for field in ("initial_cursor", "final_cursor"):
            if field not in query:
                raise Problem(422, f"body[{index}].{field} is required")
        initial = _resolved(query["initial_cursor"], f"body[{index}].initial_cursor",
                            timeline, bounds)
        final = _resolved(query["final_cursor"], f"body[{index}].final_cursor",
                          timeline, bounds)
        if initial.partition != final.partition:
            raise Problem(422, f"body[{index}]: initial_cursor is in partition "
                               f"\"{initial.partition}\" and final_cursor in partition "
                               f"\"{final.partition}\"; both must be in the same partition")
        results.append({"initial_cursor": _as_sent(query["initial_cursor"]),
                        "final_cursor": _as_sent(query["final_cursor"]),
                        "distance": final.offset - initial.offset})
    return jsonify(results)


@blueprint.post("/event-types/<name>/cursors-lag")
@needs_scope(Scope.READ)
def cursors_lag(name: str) -> Response:
    """One Partition per cursor, in the order sent, with the events after the cursor."""
    timeline = _readable_timeline(name)
    cursors = _json_array("cursors")
    bounds = partition_bounds(timeline)
    lags = []
    for index, cursor in enumerate(cursors):
        position = _resolved(cursor, f"body[{index}]", timeline, bounds)
        lags.append(partition_view(timeline, bounds[position.partition], position.offset))
    return jsonify(lags)


def _shift_of(item: Mapping[str, Any], index: int) -> int:
    if "shift" not in item:
        raise Problem(422, f"body[{index}].shift is required: the number of events to move "
                           "the cursor by (negative moves it back)")
    shift = item["shift"]
    if isinstance(shift, bool) or not isinstance(shift, int):
        raise Problem(422, f"body[{index}].shift must be an integer number of events, "
                           f"got {json.dumps(shift)}")
    return shift


def _shifted(position: Position, shift: int, available: PartitionBounds,
             timeline: Timelines, where: str) -> int:
    """The position ``shift`` events from the position; from just before the
    oldest available event (``oldest - 1``) up to the newest one."""
    target = position.offset + shift
    partition = position.partition
    if target < available.oldest - 1:
        earliest = timeline.encode(partition, available.oldest - 1)
        raise Problem(422, f"{where}: shifting by {shift} leads to an expired position; the "
                           f"oldest available event is at "
                           f"{timeline.encode(partition, available.oldest)}, so the "
                           f"smallest shift is {available.oldest - 1 - position.offset} "
                           f"(to {earliest})")
    if target > available.newest:
        newest = (f"the newest event is at {timeline.encode(partition, available.newest)}"
                  if available.newest >= available.oldest
                  else "the partition has no available events")
        raise Problem(422, f"{where}: shifting by {shift} leads to an offset that does not "
                           f"exist yet; {newest}, so the largest shift is "
                           f"{available.newest - position.offset}")
    return target


@blueprint.post("/event-types/<name>/shifted-cursors")
@needs_scope(Scope.READ)
def shifted_cursors(name: str) -> Response:
    """Each cursor moved by its ``shift`` events, in the order sent."""
    timeline = _readable_timeline(name)
    items = _json_array("cursors with a shift")
    bounds = partition_bounds(timeline)
    shifted = []
    for index, item in enumerate(items):
        where = f"body[{index}]"
        cursor = _object(item, index, "partition, offset and shift")
        position = _resolved(cursor, where, timeline, bounds)
        shift = _shift_of(cursor, index)
        target = _shifted(position, shift, bounds[position.partition], timeline,
                          f"{where} {describe(cursor)}")
        shifted.append(client_cursor(timeline, position.partition, target))
    return jsonify(shifted)
