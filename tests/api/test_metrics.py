"""``/metrics`` (Dropwizard JSON) and ``/metrics/prometheus`` over HTTP against the
session's gunicorn (two workers): the figures move by exactly the work the test
does, whichever worker did it and whichever worker answers the scrape."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from deploy.localstack import free_port
from tests.api.conftest import start_gunicorn, stop_gunicorn, wait_until_serving
from tests.helpers.broker import business_event, new_event_type
from tests.helpers.subscription_streams import StreamClient
from tests.helpers.waiting import wait_until

SCRAPES = 8  # answers from both workers, in all likelihood; each must agree


@pytest.fixture
def event_type(base_url):
    name = new_event_type(base_url)
    yield name
    requests.delete(f"{base_url}/event-types/{name}")


def dropwizard(base_url: str) -> dict:
    response = requests.get(base_url + "/metrics")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    return response.json()


def prometheus(base_url: str) -> dict[tuple[str, tuple], float]:
    """Every sample of the text format: (name, sorted labels) -> value."""
    response = requests.get(base_url + "/metrics/prometheus")
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.text)
            for sample in family.samples}


def every_answer(base_url: str, check) -> None:
    """``check(document)`` holds once the workers wrote what they counted (they add it to
    the metrics up to ``COUNT_INTERVAL_S`` later), then for several answers in a row (both
    workers answer)."""
    def holds() -> bool:
        try:
            check(dropwizard(base_url))
        except (AssertionError, KeyError):
            return False
        return True

    wait_until(holds, timeout=10, what="the counts written")
    for _ in range(SCRAPES):
        check(dropwizard(base_url))


def hashed(name: str) -> str:
    return name.replace(".", "#")


def test_publishing_counts_every_event_and_byte_across_workers(base_url, event_type):
    bodies = [json.dumps([business_event(n) for n in range(batch)]).encode()
              for batch in (1, 3, 5, 7, 2, 4, 6, 8, 9, 10)]
    for body in bodies:  # a new connection each: the workers share them out
        response = requests.post(f"{base_url}/event-types/{event_type}/events", data=body,
                                 headers={"Content-Type": "application/json"})
        assert response.status_code == 200, response.text
    refused = requests.post(f"{base_url}/event-types/{event_type}/events", json=[{"x": 1}])
    assert refused.status_code == 422
    events, traffic = 55, sum(len(body) for body in bodies)
    prefix = f"nakadi.eventtypes.{hashed(event_type)}.publishing"

    def check(document: dict) -> None:
        assert document["version"]
        assert set(document) == {"version", "gauges", "counters", "histograms", "meters",
                                 "timers"}
        meters, timers, histograms = (document[k] for k in ("meters", "timers", "histograms"))
        assert meters[f"{prefix}.events"]["count"] == events
        assert meters[f"{prefix}.trafficInBytes"]["count"] == traffic
        assert meters[f"{prefix}.200"]["count"] == len(bodies)
        assert meters[f"{prefix}.422"]["count"] == 1
        timer = timers[prefix]
        assert timer["count"] == len(bodies) + 1
        assert 0 < timer["mean"] < 10_000 and timer["duration_units"] == "milliseconds"
        assert timer["p50"] <= timer["p99"]
        per_batch = histograms[f"{prefix}.eventsPerBatch"]
        assert per_batch["count"] == len(bodies) and per_batch["mean"] == events / len(bodies)

    every_answer(base_url, check)
    samples = prometheus(base_url)
    labels = (("event_type", event_type),)
    assert samples[("nakadi_published_events_total", labels)] == events
    assert samples[("nakadi_published_bytes_total", labels)] == traffic
    assert samples[("nakadi_publishing_seconds_count", labels)] == len(bodies) + 1
    assert samples[("nakadi_publishing_responses_total",
                    (("event_type", event_type), ("status", "422")))] == 1
    assert not any(name.endswith("_m1_rate") for name, _ in samples)


def test_one_minute_rates_follow_publishing(base_url, event_type):
    body = [business_event(n) for n in range(10)]
    assert requests.post(f"{base_url}/event-types/{event_type}/events",
                         json=body).status_code == 200
    name = f"nakadi.eventtypes.{hashed(event_type)}.publishing.events"
    # The workers tick every 5 s: the rate of 10 events is 2 events/s over that tick.
    rate = wait_until(lambda: dropwizard(base_url)["meters"].get(name, {}).get("m1_rate"),
                      timeout=15, what="a one-minute rate")
    assert 0 < rate <= 2.0


def test_low_level_streams_count_events_bytes_and_open_streams(base_url, event_type):
    cursors = [{"partition": str(p), "offset": "begin"} for p in range(4)]
    response = requests.get(
        f"{base_url}/event-types/{event_type}/events",
        params={"batch_limit": 5, "stream_limit": 12, "batch_flush_timeout": 1},
        headers={"X-Nakadi-Cursors": json.dumps(cursors), "Accept-Encoding": "identity"},
        stream=True, timeout=15)
    assert response.status_code == 200
    consumers = f"nakadi.eventtypes.{hashed(event_type)}.consumers"
    wait_until(lambda: dropwizard(base_url)["counters"].get(consumers) == {"count": 1},
               what="the stream counted as open")
    # Published once the stream is seen open: with them, it reaches its limit and ends.
    assert requests.post(f"{base_url}/event-types/{event_type}/events",
                         json=[business_event(n) for n in range(12)]).status_code == 200
    received = response.raw.read()
    streamed = sum(len(json.loads(line).get("events", [])) for line in received.splitlines())
    assert streamed == 12
    bytes_name = f"lola.unauthenticated.{hashed(event_type)}.bytes-flushed"
    wait_until(lambda: dropwizard(base_url)["counters"][consumers] == {"count": 0},
               what="the stream counted as closed")

    def check(document: dict) -> None:
        meters = document["meters"]
        assert meters[f"nakadi.eventtypes.{hashed(event_type)}.streaming.events"]["count"] == 12
        assert meters[bytes_name]["count"] == len(received)

    every_answer(base_url, check)
    samples = prometheus(base_url)
    assert samples[("nakadi_streamed_events_total", (("event_type", event_type),))] == 12
    assert samples[("nakadi_open_streams", (("event_type", event_type),))] == 0


def test_subscription_streams_count_events_commits_and_consumers(base_url, event_type):
    created = requests.post(base_url + "/subscriptions", json={
        "owning_application": f"app-{uuid.uuid4().hex[:8]}", "event_types": [event_type],
        "read_from": "begin"})
    assert created.status_code == 201
    subscription = created.json()["id"]
    try:
        assert requests.post(f"{base_url}/event-types/{event_type}/events",
                             json=[business_event(n) for n in range(8)]).status_code == 200
        client = StreamClient(base_url, subscription, batch_limit=8, batch_flush_timeout=1,
                              max_uncommitted_events=100)
        consumers = f"nakadi.subscriptions.{subscription}.consumers"
        wait_until(lambda: dropwizard(base_url)["counters"].get(consumers) == {"count": 1},
                   what="the stream counted as open")
        # The scrape itself and the open stream, at least, are being served (the other
        # worker's figure is at most one 5 s tick old).
        wait_until(lambda: dropwizard(base_url)["gauges"]["process.requests.active"]["value"]
                   >= 2, what="the stream among the requests being served")
        batches = [client.events_batch()]  # one batch per partition
        while sum(len(batch["events"]) for batch in batches) < 8:
            batches.append(client.events_batch())
        lag = f"nakadi.subscriptions.{subscription}.lag"
        wait_until(lambda: dropwizard(base_url)["gauges"].get(lag) == {"value": 8},
                   what="a lag of the 8 events sent, not committed")
        committed = client.commit(*(batch["cursor"] for batch in batches))
        assert committed.status_code == 204, committed.text
        wait_until(lambda: dropwizard(base_url)["gauges"][lag] == {"value": 0},
                   what="no lag once committed")
        client.vanish()
        wait_until(lambda: dropwizard(base_url)["counters"][consumers] == {"count": 0},
                   what="the stream counted as closed")
        # Nobody consumes: the lag still grows with what is published.
        assert requests.post(f"{base_url}/event-types/{event_type}/events",
                             json=[business_event(n) for n in range(3)]).status_code == 200
        wait_until(lambda: dropwizard(base_url)["gauges"][lag] == {"value": 3},
                   what="the lag of a subscription nobody reads")

        def check(document: dict) -> None:
            meters = document["meters"]
            prefix = f"nakadi.subscriptions.{subscription}"
            assert meters[f"{prefix}.streaming.events"]["count"] == 8
            assert meters[f"{prefix}.commits"]["count"] == len(batches)
            assert meters[f"hila.unauthenticated.{subscription}.bytes-flushed"]["count"] > 0

        every_answer(base_url, check)
    finally:
        requests.delete(f"{base_url}/subscriptions/{subscription}")


def test_process_figures_are_there_for_zmon(base_url):
    # Both workers count once both started (the session's server may be young).
    wait_until(lambda: dropwizard(base_url)["gauges"]["process.workers"]["value"] == 2,
               what="both workers counted")
    gauges = dropwizard(base_url)["gauges"]
    assert gauges["process.memory.rss"]["value"] > 10_000_000
    assert gauges["jvm.memory.total.used"] == gauges["process.memory.rss"]
    assert gauges["process.threads"]["value"] >= 2
    assert gauges["process.fds.open"]["value"] > 0
    # The session's server started minutes ago (a master's unset gauge read 0: 56 years).
    assert 0 < gauges["process.uptime"]["value"] < 3600
    assert abs(time.time() - gauges["process.uptime"]["value"]
               - gauges["process.start_time"]["value"]) < 5
    assert gauges["python.gc.gen0.collections"]["value"] >= 0


def worker_pids(master: int) -> set[int]:
    return {int(pid) for pid in
            Path(f"/proc/{master}/task/{master}/children").read_text().split()}


def test_killed_workers_keep_their_counts_and_drop_their_gauges(server_env, tmp_path):
    """Counters of a dead worker stay in the instance's totals; its gauges (the open
    stream it served) stop counting once gunicorn's master sees it die."""
    port = free_port()
    log = tmp_path / "gunicorn.log"
    process = start_gunicorn(server_env, port, log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(process, url, log)
        name = new_event_type(url)
        for _ in range(6):
            assert requests.post(f"{url}/event-types/{name}/events",
                                 json=[business_event(n) for n in range(5)]).status_code == 200
        published = f"nakadi.eventtypes.{hashed(name)}.publishing.events"
        wait_until(lambda: dropwizard(url)["meters"].get(published, {}).get("count") == 30,
                   timeout=30, what="the publishes counted")
        stream = requests.get(f"{url}/event-types/{name}/events", stream=True, timeout=15)
        consumers = f"nakadi.eventtypes.{hashed(name)}.consumers"
        wait_until(lambda: dropwizard(url)["counters"].get(consumers) == {"count": 1},
                   timeout=30, what="the stream counted as open")
        workers = worker_pids(process.pid)
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        stream.close()
        wait_until(lambda: len(worker_pids(process.pid) - workers) == 2, timeout=60,
                   what="two new workers")
        wait_until(lambda: dropwizard(url)["gauges"]["process.workers"]["value"] == 2,
                   timeout=60, what="the new workers counted, the dead ones not")
        document = dropwizard(url)
        assert document["meters"][published]["count"] == 30
        assert document["counters"].get(consumers, {"count": 0}) == {"count": 0}
    except BaseException:
        print(log.read_text()[-5000:])  # what the server said, for the failure's report
        raise
    finally:
        stop_gunicorn(process)
