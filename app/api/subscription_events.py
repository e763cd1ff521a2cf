"""``/subscriptions/{id}/events``: a subscription stream (GET), or one reading
partitions it names (POST, "GET with body"). A HEAD makes the GET's checks and
answers its headers without opening a stream (``stream_head``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Blueprint, Response, g, request

from app.api.body import optional_json_body
from app.api.lookups import (
    subscription_bounds,
    subscription_or_404,
    subscription_partitions_of,
)
from app.api.params import int_param
from app.api.stream_params import stream_limits
from app.coordination.subscription_state import SubscriptionState
from app.domain.subscription import Subscription
from app.domain.topology import PartitionKey
from app.monitoring.recording import StreamMeter
from app.problems import Problem
from app.security.guard import (
    needs_scope,
    require_subscription_reader,
    subscription_reader_refusal,
)
from app.security.scopes import Scope
from app.services import services
from app.storage.engine import StorageEngine
from app.streaming.response import refuse_while_shutting_down, stream_head, stream_response
from app.subscriptions.partitions import SubscriptionPartitions, starting_offsets
from app.subscriptions.stream import SubscriptionStream
from app.subscriptions.stream_options import (
    MAX_COMMIT_TIMEOUT_S,
    StreamRefused,
    SubscriptionStreamParams,
)

blueprint = Blueprint("subscription_events", __name__)

STREAM_ID_HEADER = "X-Nakadi-StreamId"
BODY_PARAMETERS = ("batch_limit", "stream_limit", "batch_flush_timeout", "stream_timeout",
                   "stream_keep_alive_limit", "max_uncommitted_events", "commit_timeout")


@blueprint.get("/subscriptions/<subscription_id>/events")
@needs_scope(Scope.READ)
def stream(subscription_id: str) -> Response:
    subscription = subscription_or_404(subscription_id)
    require_subscription_reader(subscription)
    return _stream(subscription, request.args, frozenset())


@blueprint.post("/subscriptions/<subscription_id>/events")
@needs_scope(Scope.READ)
def stream_partitions(subscription_id: str) -> Response:
    """Parameters come from the body (the query's are used for those it lacks)."""
    subscription = subscription_or_404(subscription_id)
    # Before the body: its 422s tell the subscription's partitions.
    require_subscription_reader(subscription)
    body = optional_json_body({})
    if not isinstance(body, Mapping):
        raise Problem(422, "the body must be a JSON object with the stream parameters and "
                           'optionally "partitions": [{"event_type": ..., "partition": ...}]')
    partitions = subscription_partitions_of(subscription)
    source = dict(request.args.items())
    source.update(_body_parameters(body))
    return _stream(subscription, source, _requested(body.get("partitions"), partitions),
                   partitions)


def _body_parameters(body: Mapping[str, Any]) -> dict[str, str]:
    """The stream parameters of the body, as text for the query's checks."""
    found = {}
    for name in BODY_PARAMETERS:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
            raise Problem(422, f"'{name}' must be an integer, got {value!r}")
        found[name] = str(int(value))
    return found


def _requested(items: Any, partitions: SubscriptionPartitions) -> frozenset[PartitionKey]:
    """The partitions a POST asks for; each must be one of the subscription's."""
    if items is None:
        return frozenset()
    if not isinstance(items, list):
        raise Problem(422, '"partitions" must be an array of {"event_type": ..., '
                           '"partition": ...}')
    keys = set()
    for item in items:
        if not isinstance(item, Mapping) or not isinstance(item.get("event_type"), str) \
                or not isinstance(item.get("partition"), str):
            raise Problem(422, f"partition {item!r} must be an object with string fields "
                               "event_type and partition")
        key = (item["event_type"], item["partition"])
        if key not in partitions:
            raise Problem(422, f"partition {key[1]!r} of event type {key[0]!r} is not part of "
                               "this subscription")
        keys.add(key)
    return frozenset(keys)


def _stream_params(source: Mapping[str, str], requested: frozenset[PartitionKey]
                   ) -> SubscriptionStreamParams:
    limits = stream_limits(source)
    max_uncommitted = int_param("max_uncommitted_events", 10, 1, status=422, source=source)
    commit_timeout = int_param("commit_timeout", 0, 0, int(MAX_COMMIT_TIMEOUT_S), status=422,
                               source=source) or MAX_COMMIT_TIMEOUT_S
    return SubscriptionStreamParams(limits, max_uncommitted, float(commit_timeout), requested)


def _stream(subscription: Subscription, source: Mapping[str, str],
            requested: frozenset[PartitionKey],
            partitions: SubscriptionPartitions | None = None) -> Response:
    """The stream of a subscription whose reader was checked."""
    refuse_while_shutting_down()
    current = services()
    params = _stream_params(source, requested)
    if request.method == "HEAD":
        return stream_head()
    if partitions is None:
        partitions = subscription_partitions_of(subscription)

    def engine_for(storage_id: str) -> StorageEngine:
        return current.engines.get(storage_id)

    # A 503 now, as a low-level stream gets, not a 200 whose stream ends at its first read.
    for storage_id in partitions.storage_ids():
        engine_for(storage_id).raise_if_known_down()
    state = SubscriptionState(current.zookeeper, subscription.id)
    meter = StreamMeter(current.kpis, current.kpis.client(g.subject),
                        subscription=subscription.id)
    stream = SubscriptionStream(subscription, partitions, state, engine_for, params,
                                request.environ.get("gunicorn.socket"),
                                refusal=subscription_reader_refusal(subscription),
                                on_batch=meter.batch, switch_watch=current.switch_watch)
    try:
        try:
            stream.start(lambda: starting_offsets(subscription, partitions,
                                                  subscription_bounds(partitions)))
        except StreamRefused as refused:
            raise Problem(refused.status, str(refused)) from None
    except BaseException:
        meter.close()
        raise
    current.subscription_lag.watch(subscription.id)

    def ended() -> None:
        try:
            stream.end()
        finally:
            meter.close()
    return stream_response(stream.lines(), ended, {STREAM_ID_HEADER: stream.id},
                           stream.time_left)
