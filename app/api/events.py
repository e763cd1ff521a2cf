"""``/event-types/{name}/events``: publishing batches of events (POST) and the
low-level event stream (GET)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import orjson
from flask import Blueprint, Response, g, request

from app.api.body import json_bytes
from app.api.lookups import event_type_or_404, partition_bounds
from app.api.stream_params import stream_limits
from app.coordination.stream_slots import TooManyStreams
from app.coordination.timeline_switch import SwitchInProgress
from app.current import current_globals
from app.cursors import CursorInvalid, positions_by_partition
from app.domain.timeline import Timelines
from app.monitoring import recording
from app.monitoring.recording import StreamMeter
from app.problems import Problem
from app.publishing.batch import BatchUnreadable, NotABatch, TooManyEvents, parse_batch
from app.publishing.late_appends import checked_append
from app.publishing.publisher import BatchRejected, Item, publish
from app.security.guard import (
    consumer_still_allowed,
    needs_scope,
    require_consumer,
    require_event_type,
)
from app.security.policy import Operation
from app.security.scopes import Scope
from app.services import services
from app.storage.engine import PartitionBounds
from app.streaming.event_stream import open_event_stream
from app.streaming.response import refuse_while_shutting_down, stream_head, stream_response

blueprint = Blueprint("events", __name__)

CURSORS_HEADER = "X-Nakadi-Cursors"


def _items_response(items: Sequence[Item], status: int) -> Response:
    return Response(orjson.dumps([item.response() for item in items]), status=status,
                    content_type="application/json")


@blueprint.post("/event-types/<name>/events")
@needs_scope(Scope.WRITE)
def publish_events(name: str) -> Response:
    current = services()
    event_type, _ = event_type_or_404(name)
    require_event_type(event_type, Operation.WRITE)
    context = current_globals()
    with recording.publishing(name, current.kpis, context.subject) as report:
        body = json_bytes(current.settings.max_batch_bytes)
        report.body_bytes = len(body)
        try:
            events, sizes = parse_batch(body, current.settings.max_batch_events)
        except BatchUnreadable as error:
            raise Problem(400, str(error)) from None
        except TooManyEvents as error:
            raise Problem(413, f"{error} (NAKADI_MAX_BATCH_EVENTS)") from None
        except NotABatch as error:
            raise Problem(422, str(error)) from None
        try:
            # Counted as in flight for timeline switches, which wait for it (or it for them).
            with current.publishing_gate.publishing(name) as missed_switch:
                event_type, timelines = event_type_or_404(name)
                active = timelines.active
                items = publish(event_type, active,
                                checked_append(current, active, missed_switch),
                                events, sizes, context.flow_id)
        except BatchRejected as rejected:
            report.status = 422
            return _items_response(rejected.items, 422)
        except SwitchInProgress as error:
            raise Problem(503, str(error)) from None
        report.stored = sum(item.status == "submitted" for item in items)
        if report.stored == len(items):
            report.status = 200
            return Response(status=200)
        report.status = 207
        return _items_response(items, 207)


def _start_positions(timeline: Timelines, bounds: Mapping[int, PartitionBounds]
                     ) -> dict[int, int]:
    """Where each partition's stream starts: after the cursors of the X-Nakadi-Cursors
    header, or after the newest event of every partition without it."""
    raw = request.headers.get(CURSORS_HEADER)
    if raw is None:
        return {partition: available.newest for partition, available in bounds.items()}
    try:
        cursors = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise Problem(422, f"{CURSORS_HEADER} is not valid JSON: {error}") from None
    if not isinstance(cursors, list) or not cursors:
        raise Problem(422, f"{CURSORS_HEADER} must be a non-empty JSON array of cursors "
                           '[{"partition": "0", "offset": "..."}]')
    try:
        return positions_by_partition(cursors, timeline, bounds)
    except CursorInvalid as error:
        raise Problem(422, f"{CURSORS_HEADER}: {error}") from None


@blueprint.get("/event-types/<name>/events")
@needs_scope(Scope.READ)
def stream_events(name: str) -> Response:
    refuse_while_shutting_down()
    current = services()
    event_type, timeline = event_type_or_404(name)
    require_consumer([event_type])
    limits = stream_limits()
    positions = _start_positions(timeline, partition_bounds(timeline))
    if request.method == "HEAD":
        return stream_head()
    meter = StreamMeter(current.kpis, current.kpis.client(g.subject), event_type=name)
    try:
        stream, slots = open_event_stream(
            current.zookeeper, current.engines.get, timeline, current.switch_watch(name),
            positions, limits,
            current.settings.max_streams_per_partition, request.environ.get("gunicorn.socket"),
            consumer_still_allowed([name]), meter.batch)
    except BaseException as error:
        meter.close()
        if isinstance(error, TooManyStreams):
            raise Problem(429, str(error), "Too Many Requests") from None
        raise

    def ended() -> None:
        slots.release()
        meter.close()
    return stream_response(stream.lines(), ended, time_left=stream.time_left)
