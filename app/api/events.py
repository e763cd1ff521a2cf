"""``/event-types/{name}/events``: publishing batches of events."""

from __future__ import annotations

import zlib

import orjson
from flask import Blueprint, Response, g, request

from app.problems import Problem
from app.publishing.batch import BatchUnreadable, NotABatch, parse_batch
from app.publishing.publisher import BatchRejected, publish
from app.services import services

blueprint = Blueprint("events", __name__)

JSON_TYPES = ("application/json",)


def _batch_body(limit: int) -> bytes:
    """The request body, gunzipped when sent with ``Content-Encoding: gzip``."""
    if request.mimetype not in JSON_TYPES:
        raise Problem(415, f"Content-Type must be application/json, not "
                           f"'{request.mimetype or 'missing'}'")
    body = request.get_data(cache=False)
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding == "gzip":
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            body = inflater.decompress(body, limit + 1)
        except zlib.error as error:
            raise Problem(400, f"the body is not valid gzip: {error}") from None
        if not inflater.eof and len(body) <= limit:
            raise Problem(400, "the gzip body is truncated")
    elif encoding != "identity":
        raise Problem(415, f"Content-Encoding '{encoding}' is not supported; use gzip")
    if len(body) > limit:
        raise Problem(413, f"the batch is larger than {limit} bytes; send smaller batches")
    return body


def _items_response(items, status: int) -> Response:
    return Response(orjson.dumps([item.response() for item in items]), status=status,
                    content_type="application/json")


@blueprint.post("/event-types/<name>/events")
def publish_events(name: str) -> Response:
    current = services()
    found = current.event_types.get(name)
    if found is None:
        raise Problem(404, f"EventType '{name}' does not exist.")
    event_type, timeline = found
    body = _batch_body(current.settings.max_batch_bytes)
    try:
        events, sizes = parse_batch(body)
    except BatchUnreadable as error:
        raise Problem(400, str(error)) from None
    except NotABatch as error:
        raise Problem(422, str(error)) from None
    engine = current.engines.get(timeline.storage_id)
    try:
        items = publish(event_type, timeline, engine, events, sizes, g.flow_id)
    except BatchRejected as rejected:
        return _items_response(rejected.items, 422)
    if all(item.status == "submitted" for item in items):
        return Response(status=200)
    return _items_response(items, 207)
