"""``/registry``: the partition and enrichment strategies this installation offers."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.registry.choices import ENRICHMENT_STRATEGIES, PARTITION_STRATEGIES
from app.security.guard import needs_scope
from app.security.scopes import Scope

blueprint = Blueprint("registry", __name__)


@blueprint.get("/registry/partition-strategies")
@needs_scope(Scope.READ)
def partition_strategies() -> Response:
    return jsonify(list(PARTITION_STRATEGIES))


@blueprint.get("/registry/enrichment-strategies")
@needs_scope(Scope.READ)
def enrichment_strategies() -> Response:
    return jsonify(list(ENRICHMENT_STRATEGIES))
