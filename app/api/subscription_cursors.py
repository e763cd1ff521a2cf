"""``/subscriptions/{id}/cursors``: the committed cursors (GET), committing
(POST, from the stream that was sent the batches) and resetting (PATCH)."""

from __future__ import annotations

import re

from flask import Blueprint, Response, jsonify, request

from app.api.body import json_body
from app.api.lookups import (
    newest_offset,
    subscription_bounds,
    subscription_or_404,
    subscription_partitions_of,
)
from app.coordination.subscription_state import ResetInProgress, SubscriptionState
from app.cursors import CursorInvalid
from app.monitoring import recording
from app.problems import Problem
from app.security.guard import (
    needs_scope,
    require_consumer_of_event_types,
    require_subscription,
    require_subscription_reader,
    require_subscription_viewer,
)
from app.security.policy import Operation
from app.security.scopes import Scope
from app.services import services
from app.subscriptions.commits import CommitRefused, commit, reset
from app.subscriptions.cursors import (
    checked_commit,
    checked_reset,
    cursor_items,
    new_cursor_token,
)
from app.subscriptions.partitions import starting_offsets

blueprint = Blueprint("subscription_cursors", __name__)

STREAM_ID_HEADER = "X-Nakadi-StreamId"
UUID_FORM = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _no_content() -> Response:
    return Response(status=204)


@blueprint.get("/subscriptions/<subscription_id>/cursors")
@needs_scope(Scope.READ)
def committed(subscription_id: str) -> Response:
    """The committed cursors; none before the subscription's first stream or reset."""
    subscription = subscription_or_404(subscription_id)
    require_subscription_viewer(subscription)
    partitions = subscription_partitions_of(subscription)
    state = SubscriptionState(services().zookeeper, subscription.id)
    items = []
    if state.offsets_initialized():
        for key, offset in state.committed_many(partitions.partition_keys()).items():
            if offset is not None:
                items.append({"event_type": key[0], "partition": key[1], "offset": offset,
                              "cursor_token": new_cursor_token()})
    return jsonify({"items": items})


def _stream_id() -> str:
    stream_id = request.headers.get(STREAM_ID_HEADER)
    if not stream_id:
        raise Problem(422, f"the {STREAM_ID_HEADER} header is required: send the one the "
                           "stream's response carried")
    if UUID_FORM.fullmatch(stream_id) is None:
        raise Problem(422, f"{STREAM_ID_HEADER} {stream_id!r} is not a stream id; send the one "
                           "the stream's response carried")
    return stream_id


@blueprint.post("/subscriptions/<subscription_id>/cursors")
@needs_scope(Scope.READ)
def commit_cursors(subscription_id: str) -> Response:
    """The hot path of a subscription: the subscription comes from the cache, as only
    ZooKeeper decides whether the commit is taken (the stream's session is removed
    with the subscription)."""
    subscription = subscription_or_404(subscription_id, cached=True)
    require_subscription_reader(subscription)
    stream_id = _stream_id()
    body = json_body()
    partitions = subscription_partitions_of(subscription)
    try:
        cursors = [checked_commit(item, partitions, newest_offset)
                   for item in cursor_items(body)]
    except CursorInvalid as error:
        raise Problem(422, str(error)) from None
    try:
        results = commit(SubscriptionState(services().zookeeper, subscription.id),
                         stream_id, cursors)
    except CommitRefused as refused:
        subscription_or_404(subscription_id)  # deleted meanwhile: a 404, as it was
        raise Problem(422, str(refused)) from None
    recording.committed(subscription.id, sum(r.result == "committed" for r in results))
    if all(r.result == "committed" for r in results):
        return _no_content()
    return jsonify({"items": [r.response() for r in results]})


@blueprint.patch("/subscriptions/<subscription_id>/cursors")
@needs_scope(Scope.READ)
def reset_cursors(subscription_id: str) -> Response:
    subscription = subscription_or_404(subscription_id)
    require_subscription(subscription, Operation.ADMIN)
    require_consumer_of_event_types(subscription)  # its 422s tell the offsets
    body = json_body()
    partitions = subscription_partitions_of(subscription)
    bounds = subscription_bounds(partitions)
    try:
        cursors = [checked_reset(item, partitions, bounds) for item in cursor_items(body)]
    except CursorInvalid as error:
        raise Problem(422, str(error)) from None
    try:
        reset(SubscriptionState(services().zookeeper, subscription.id), cursors,
              lambda: starting_offsets(subscription, partitions, bounds))
    except ResetInProgress:
        raise Problem(409, "a cursor reset of this subscription is already in progress; "
                           "try again once it is done") from None
    return _no_content()
