"""``/event-types/{name}/partitions``: the available offsets of each partition and,
given a consumer's cursors, how many events it has not consumed yet."""

from __future__ import annotations

from collections.abc import Mapping

from flask import Blueprint, Response, jsonify, request

from app import strict_json
from app.api.lookups import event_type_or_404, partition_bounds
from app.cursors import CursorInvalid, is_partition, positions_by_partition, resolve
from app.domain.timeline import Timelines
from app.problems import Problem
from app.security.guard import needs_scope, require_event_type
from app.security.policy import Operation
from app.security.scopes import Scope
from app.storage.engine import PartitionBounds

blueprint = Blueprint("partitions", __name__)


def partition_view(timeline: Timelines, available: PartitionBounds,
                   consumed: int | None = None) -> dict[str, object]:
    """A Partition object; with ``consumed`` (a position), its ``unconsumed_events``.

    An empty partition shows its newest offset before its oldest one, as Nakadi does."""
    view: dict[str, object] = {
        "partition": str(available.partition),
        "oldest_available_offset": timeline.encode(available.partition, available.oldest),
        "newest_available_offset": timeline.encode(available.partition, available.newest),
    }
    if consumed is not None:
        view["unconsumed_events"] = available.newest - consumed
    return view


def _consumed_by_partition(raw: str, timeline: Timelines,
                           bounds: Mapping[int, PartitionBounds]) -> dict[int, int]:
    """The engine offset consumed in each partition named by the ``cursors`` parameter."""
    try:
        cursors = strict_json.loads(raw.encode())
    except ValueError as error:
        raise Problem(400, f"'cursors' must be a URL-encoded JSON array of cursors; "
                           f"it is not valid JSON: {error}") from None
    if not isinstance(cursors, list):
        raise Problem(422, "'cursors' must be a JSON array of cursors "
                           "like [{\"partition\": \"0\", \"offset\": \"begin\"}]")
    try:
        return positions_by_partition(cursors, timeline, bounds)
    except CursorInvalid as error:
        raise Problem(422, f"cursors: {error}") from None


@blueprint.get("/event-types/<name>/partitions")
@needs_scope(Scope.READ)
def list_partitions(name: str) -> Response:
    event_type, timeline = event_type_or_404(name)
    require_event_type(event_type, Operation.READ)
    bounds = partition_bounds(timeline)
    raw = request.args.get("cursors")
    consumed = {} if raw is None else _consumed_by_partition(raw, timeline, bounds)
    return jsonify([partition_view(timeline, available, consumed.get(partition))
                    for partition, available in sorted(bounds.items())])


@blueprint.get("/event-types/<name>/partitions/<partition>")
@needs_scope(Scope.READ)
def get_partition(name: str, partition: str) -> Response:
    event_type, timeline = event_type_or_404(name)
    require_event_type(event_type, Operation.READ)
    if not is_partition(partition, timeline.partitions):
        raise Problem(404, f"EventType '{name}' has no partition '{partition}'; its partitions "
                           f"are \"0\" to \"{timeline.partitions - 1}\".")
    bounds = partition_bounds(timeline)
    offset = request.args.get("consumed_offset")
    if offset is None:
        return jsonify(partition_view(timeline, bounds[int(partition)]))
    try:
        position = resolve({"partition": partition, "offset": offset}, timeline, bounds)
    except CursorInvalid as error:
        raise Problem(422, f"consumed_offset: {error}") from None
    return jsonify(partition_view(timeline, bounds[position.partition], position.offset))
