"""``/storages``: the storage backends event types live in, and which one new
event types go to (``/storages/default/{id}``). Nakadi administrators only:
reading needs the admin ``readers`` permission, changing the ``writers`` one."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.api.body import json_body
from app.domain.security import AdminPermission
from app.problems import Problem
from app.repository import storages as repository
from app.security.guard import needs_scope, require_admin
from app.security.scopes import Scope
from app.services import services
from app.storage.configuration import StorageInvalid, storage_from_body, storage_view
from app.storage.engine import StorageError
from app.storage.engines import build_engine

blueprint = Blueprint("storages", __name__)


def _storage_or_404(storage_id: str) -> repository.Storage:
    storage = repository.get_storage(services().pool, storage_id)
    if storage is None:
        raise Problem(404, f"Storage '{storage_id}' does not exist.")
    return storage


def _check_reachable(storage: repository.Storage) -> None:
    """A storage is registered only if it answers: otherwise /health would report it down."""
    current = services()
    try:
        engine = build_engine(storage, current.pool, current.settings.kafka_timeout_s,
                              current.settings.kafka_client_config)
    except StorageError as error:
        raise Problem(422, f"the storage cannot be used: {error}") from None
    try:
        engine.check()
    except StorageError as error:
        raise Problem(422, f"the storage does not answer with this configuration: {error}"
                      ) from None
    finally:
        engine.close()


@blueprint.get("/storages")
@needs_scope(Scope.CONFIG)
def list_storages() -> Response:
    require_admin(AdminPermission.READ)
    return jsonify([storage_view(s) for s in repository.list_storages(services().pool)])


@blueprint.post("/storages")
@needs_scope(Scope.CONFIG)
def create_storage() -> Response:
    require_admin(AdminPermission.WRITE)
    try:
        storage = storage_from_body(json_body())
    except StorageInvalid as error:
        raise Problem(422, str(error)) from None
    if repository.get_storage(services().pool, storage.id) is not None:
        raise Problem(409, f"Storage '{storage.id}' already exists.")
    _check_reachable(storage)
    try:
        repository.insert_storage(services().pool, storage)
    except repository.StorageExists:
        raise Problem(409, f"Storage '{storage.id}' already exists.") from None
    response = jsonify(storage_view(storage))
    response.status_code = 201
    return response


@blueprint.get("/storages/<storage_id>")
@needs_scope(Scope.CONFIG)
def get_storage(storage_id: str) -> Response:
    require_admin(AdminPermission.READ)
    return jsonify(storage_view(_storage_or_404(storage_id)))


@blueprint.delete("/storages/<storage_id>")
@needs_scope(Scope.CONFIG)
def delete_storage(storage_id: str) -> Response:
    require_admin(AdminPermission.WRITE)
    try:
        deleted = repository.delete_storage(services().pool, storage_id)
    except repository.StorageInUse as error:
        raise Problem(422, str(error)) from None
    if not deleted:
        raise Problem(404, f"Storage '{storage_id}' does not exist.")
    return Response(status=204)


@blueprint.put("/storages/default/<storage_id>")
@needs_scope(Scope.CONFIG)
def set_default_storage(storage_id: str) -> Response:
    require_admin(AdminPermission.WRITE)
    storage = repository.make_default(services().pool, storage_id)
    if storage is None:
        raise Problem(404, f"Storage '{storage_id}' does not exist.")
    return jsonify(storage_view(storage))
