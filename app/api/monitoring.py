"""``/metrics``: the instance's figures as Dropwizard JSON (as Nakadi serves them), and
``/metrics/prometheus``: the same figures in Prometheus's text format. Any
authenticated caller may read them, whatever the token's scopes (001 asks none), so
monitoring agents need no rights of their own."""

from __future__ import annotations

import orjson
from flask import Blueprint, Response
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4

from app.monitoring.exposition import collect, dropwizard, off_the_hub, prometheus_text
from app.monitoring.recording import write_counts
from app.monitoring.ticker import refresh_process_figures

blueprint = Blueprint("monitoring", __name__)


@blueprint.get("/metrics")
def metrics() -> Response:
    refresh_process_figures()  # the answering worker's own figures are current
    write_counts()
    return Response(off_the_hub(lambda: orjson.dumps(dropwizard(collect()))),
                    content_type="application/json")


@blueprint.get("/metrics/prometheus")
def prometheus() -> Response:
    refresh_process_figures()
    write_counts()
    return Response(off_the_hub(lambda: prometheus_text(collect())),
                    content_type=CONTENT_TYPE_PLAIN_0_0_4)
