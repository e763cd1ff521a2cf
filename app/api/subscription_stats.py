"""``/subscriptions/{id}/stats``: per partition, who streams it and what is left to read."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.api.lookups import (
    subscription_bounds,
    subscription_or_404,
    subscription_partitions_of,
)
from app.api.params import bool_param
from app.coordination.subscription_state import SubscriptionState
from app.security.guard import needs_scope, require_subscription_viewer
from app.security.scopes import Scope
from app.services import services
from app.subscriptions.stats import subscription_stats

blueprint = Blueprint("subscription_stats", __name__)


@blueprint.get("/subscriptions/<subscription_id>/stats")
@needs_scope(Scope.READ)
def stats(subscription_id: str) -> Response:
    current = services()
    subscription = subscription_or_404(subscription_id)
    require_subscription_viewer(subscription)
    show_time_lag = bool_param("show_time_lag")
    partitions = subscription_partitions_of(subscription)
    bounds = subscription_bounds(partitions)
    items = subscription_stats(subscription, partitions,
                               SubscriptionState(current.zookeeper, subscription.id),
                               bounds, current.engines.get, show_time_lag)
    return jsonify({"items": items})
