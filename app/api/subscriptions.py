"""``/subscriptions`` and ``/subscriptions/{id}``: creating, listing, reading, changing
and deleting subscriptions (the rules are in ``app.subscriptions.crud``)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from app.api.body import json_body
from app.api.params import MAX_OFFSET, bool_param, int_param, pagination_links
from app.domain.security import Feature
from app.problems import Problem, problem_response
from app.security.guard import (
    feature_enabled,
    needs_scope,
    require_consumer,
    require_subscription,
    subscription_viewing,
)
from app.security.policy import Operation
from app.security.scopes import Scope
from app.services import services
from app.subscriptions import crud
from app.subscriptions.body import SubscriptionInvalid, subscription_view

blueprint = Blueprint("subscriptions", __name__)

@blueprint.errorhandler(SubscriptionInvalid)
def _invalid(error: SubscriptionInvalid) -> Response:
    return problem_response(422, error.detail)


@blueprint.errorhandler(crud.SubscriptionCreationDisabled)
def _creation_disabled(error: crud.SubscriptionCreationDisabled) -> Response:
    return problem_response(503, str(error))


@blueprint.errorhandler(crud.SubscriptionNotFound)
def _not_found(error: crud.SubscriptionNotFound) -> Response:
    return problem_response(404, error.detail)


def _no_content() -> Response:
    response = Response(status=204)
    del response.headers["Content-Type"]
    return response


def _filter(name: str, value: str) -> str:
    if "\x00" in value:
        raise Problem(400, f"'{name}' must not contain NUL characters")
    return value


@blueprint.post("/subscriptions")
@needs_scope(Scope.READ)
def create() -> Response:
    subscription, created = crud.create_subscription(
        json_body(), feature_enabled(Feature.DISABLE_SUBSCRIPTION_CREATION), require_consumer)
    response = jsonify(subscription_view(subscription))
    location = f"/subscriptions/{subscription.id}"
    response.headers["Location"] = location
    if created:
        services().kpis.subscription_logged(subscription.id, "created")
        response.status_code = 201
        response.headers["Content-Location"] = location
    return response


@blueprint.get("/subscriptions")
@needs_scope(Scope.READ)
def list_subscriptions() -> Response:
    owning_application = _filter("owning_application",
                                 request.args.get("owning_application", ""))
    event_types = [_filter("event_type", name) for name in request.args.getlist("event_type")]
    limit = int_param("limit", 20, 1, 1000)
    offset = int_param("offset", 0, 0, MAX_OFFSET)
    show_status = bool_param("show_status")
    page = crud.list_subscriptions(owning_application or None, event_types, offset, limit)
    query = [("owning_application", owning_application)] if owning_application else []
    query += [("event_type", name) for name in event_types]
    if show_status:
        query.append(("show_status", "true"))
    return jsonify({"_links": pagination_links(offset, limit, page.has_more, query),
                    "items": crud.listed_views(page.items, show_status,
                                               subscription_viewing)})


@blueprint.get("/subscriptions/<subscription_id>")
@needs_scope(Scope.READ)
def get(subscription_id: str) -> Response:
    return jsonify(subscription_view(crud.get_subscription(subscription_id)))


@blueprint.put("/subscriptions/<subscription_id>")
@needs_scope(Scope.READ)
def update(subscription_id: str) -> Response:
    require_subscription(crud.get_subscription(subscription_id), Operation.ADMIN)
    crud.update_subscription(subscription_id, json_body())
    return _no_content()


@blueprint.delete("/subscriptions/<subscription_id>")
@needs_scope(Scope.READ)
def delete(subscription_id: str) -> Response:
    require_subscription(crud.get_subscription(subscription_id), Operation.ADMIN)
    crud.delete_subscription(subscription_id)
    services().kpis.subscription_logged(subscription_id, "deleted")
    return _no_content()
