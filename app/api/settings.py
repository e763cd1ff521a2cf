"""``/settings/admins``, ``/settings/blacklist`` and ``/settings/features``: Nakadi's
administrators, blocked consumers and producers, and feature toggles. Reading
needs the admin ``readers`` permission, changing the blacklist and features the
``writers`` one, changing the admin lists the ``admins`` one."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.api.body import json_body
from app.domain.security import AdminPermission, BlacklistType, Feature
from app.problems import Problem, problem_response
from app.repository import security_settings as repository
from app.security.guard import current_policy, needs_scope, require_admin
from app.security.scopes import Scope
from app.security.settings_body import (
    MAX_TEXT,
    SettingsInvalid,
    admin_authorization_view,
    parse_admin_authorization,
    parse_feature,
)
from app.services import services

blueprint = Blueprint("settings", __name__)


@blueprint.errorhandler(SettingsInvalid)
def _invalid(error: SettingsInvalid) -> Response:
    return problem_response(422, error.detail)


def _no_content() -> Response:
    response = Response(status=204)
    del response.headers["Content-Type"]
    return response


def _changed() -> None:
    """This process applies a change at once; the others when they hear its NOTIFY."""
    services().security.settings.invalidate()


@blueprint.get("/settings/admins")
@needs_scope(Scope.CONFIG)
def get_admins() -> Response:
    require_admin(AdminPermission.READ)
    return jsonify(admin_authorization_view(current_policy().admins))


@blueprint.post("/settings/admins")
@needs_scope(Scope.CONFIG)
def set_admins() -> Response:
    require_admin(AdminPermission.ADMIN)
    admins = parse_admin_authorization(json_body())
    repository.replace_admins(services().pool, admins)
    _changed()
    return jsonify(admin_authorization_view(admins))


@blueprint.get("/settings/blacklist")
@needs_scope(Scope.CONFIG)
def get_blacklist() -> Response:
    require_admin(AdminPermission.READ)
    blocked = current_policy().settings.blacklist

    def names(kind: BlacklistType) -> list[str]:
        return sorted(name for blocked_kind, name in blocked if blocked_kind is kind)

    return jsonify({
        "producers": {"event_types": names(BlacklistType.PRODUCER_ET),
                      "apps": names(BlacklistType.PRODUCER_APP)},
        "consumers": {"event_types": names(BlacklistType.CONSUMER_ET),
                      "apps": names(BlacklistType.CONSUMER_APP)},
    })


def _blacklist_entry(blacklist_type: str, name: str) -> tuple[BlacklistType, str]:
    try:
        kind = BlacklistType(blacklist_type.upper())
    except ValueError:
        known = ", ".join(kind.value for kind in BlacklistType)
        raise Problem(422, f"blacklist_type '{blacklist_type}' is not one of {known}"
                      ) from None
    if not name.strip() or len(name) > MAX_TEXT:
        raise Problem(422, f"name must be 1 to {MAX_TEXT} characters")
    return kind, name


@blueprint.put("/settings/blacklist/<blacklist_type>/<name>")
@needs_scope(Scope.CONFIG)
def block(blacklist_type: str, name: str) -> Response:
    require_admin(AdminPermission.WRITE)
    repository.block(services().pool, *_blacklist_entry(blacklist_type, name))
    _changed()
    return _no_content()


@blueprint.delete("/settings/blacklist/<blacklist_type>/<name>")
@needs_scope(Scope.CONFIG)
def unblock(blacklist_type: str, name: str) -> Response:
    require_admin(AdminPermission.WRITE)
    repository.unblock(services().pool, *_blacklist_entry(blacklist_type, name))
    _changed()
    return _no_content()


@blueprint.get("/settings/features")
@needs_scope(Scope.CONFIG)
def get_features() -> Response:
    require_admin(AdminPermission.READ)
    settings = current_policy().settings
    return jsonify({"items": [{"feature": feature.value, "enabled": settings.is_enabled(feature)}
                              for feature in Feature]})


@blueprint.post("/settings/features")
@needs_scope(Scope.CONFIG)
def set_feature() -> Response:
    require_admin(AdminPermission.WRITE)
    repository.set_feature(services().pool, *parse_feature(json_body()))
    _changed()
    return _no_content()
