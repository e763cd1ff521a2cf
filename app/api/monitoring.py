"""``/metrics``: the instance's figures as Dropwizard JSON (as Nakadi serves them), and
``/metrics/prometheus``: the same figures in Prometheus's text format. Any
authenticated caller may read them (with the read scope, when one is configured),
so monitoring agents need no admin rights."""

from __future__ import annotations

import orjson
from flask import Blueprint, Response
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import Metric

from app.monitoring.exposition import collect, dropwizard, prometheus_text
from app.monitoring.ticker import refresh_process_figures
from app.security.guard import needs_scope
from app.security.policy import Operation

blueprint = Blueprint("monitoring", __name__)


def _families() -> list[Metric]:
    refresh_process_figures()  # the answering worker's own figures are current
    return collect()


@blueprint.get("/metrics")
@needs_scope(Operation.READ)
def metrics() -> Response:
    return Response(orjson.dumps(dropwizard(_families())), content_type="application/json")


@blueprint.get("/metrics/prometheus")
@needs_scope(Operation.READ)
def prometheus() -> Response:
    return Response(prometheus_text(_families()), content_type=CONTENT_TYPE_PLAIN_0_0_4)
