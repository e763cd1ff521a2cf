"""Killing what the broker depends on, under publish and stream load.

Each test checks what clients get during the outage (a 503 Problem naming the
dependency, with Retry-After; never a 500, never a hang), that the broker
serves again once the dependency is back without being restarted, and that
every acknowledged event is readable afterwards exactly once, in publishing
order per partition. The figures (time to the first 503, slowest 503, time to
heal) are printed; run with ``-s`` to see them.

Tansu keeps its data in memory, so the Kafka test checks the outage answers
and that publishing recovers, not durability across the broker's restart.
"""

from __future__ import annotations

import os
import signal
import time

import requests

from app.repository.database import ANSWER_MARGIN_S
from tests.api.conftest import worker_pids
from tests.faults.conftest import DATABASE_TIMEOUT_S, FaultStack
from tests.helpers.load import (
    CLIENT_TIMEOUT_S,
    Answer,
    Publisher,
    Streamer,
    check_exactly_once_in_order,
    new_fault_event_type,
    read_everything,
)
from tests.helpers.timelines import move_to
from tests.helpers.waiting import wait_until

PARTITIONS = 4
FROZEN_ANSWER_BOUND_S = 2 * (float(DATABASE_TIMEOUT_S) + ANSWER_MARGIN_S) + 1
"""A request makes at most two waits that run out while PostgreSQL hangs: one for an
answer on a connection it had (the database timeout and the margin), one for a new
connection (the connect timeout), or two for answers."""
FROZEN_CLIENT_TIMEOUT_S = 3 * FROZEN_ANSWER_BOUND_S  # so a slow answer is measured


def _since(answers: list[Answer], moment: float) -> list[Answer]:
    return [answer for answer in list(answers) if answer.started >= moment]


def _assert_outage_answers(answers: list[Answer], dependency: str) -> list[Answer]:
    """Every answer is a success or a 503 Problem naming the dependency; the 503s."""
    unavailable = [answer for answer in answers if answer.status == 503]
    for answer in answers:
        assert answer.status in (200, 503), answer
    for answer in unavailable:
        assert answer.content_type == "application/problem+json", answer
        assert answer.retry_after is not None and int(answer.retry_after) > 0, answer
        assert dependency in answer.detail, answer
    return unavailable


def _healed(answers: list[Answer], restarting: float) -> float:
    """When the first success after the restart began was answered."""
    return min(a.started + a.took for a in _since(answers, restarting) if a.status == 200)


def _figures(what: str, killed: float, unavailable: list[Answer], restarting: float,
             up: float, healed: float) -> None:
    first = min(answer.started + answer.took for answer in unavailable) - killed
    slowest = max(answer.took for answer in unavailable)
    print(f"\n{what}: first 503 {first:.2f} s after the kill, slowest 503 {slowest:.3f} s,"
          f" {len(unavailable)} answered 503; the restart took {up - restarting:.2f} s;"
          f" serving again {healed - up:+.2f} s after it was up")


def _load(faults: FaultStack, name: str) -> tuple[Publisher, Streamer]:
    publisher, streamer = Publisher(faults.url, name), Streamer(faults.url, name)
    publisher.start()
    streamer.start()
    wait_until(lambda: publisher.ok_since(0) and streamer.opened_since(0), 20,
               what="publishing and streaming")
    return publisher, streamer


def _health(faults: FaultStack) -> requests.Response:
    return requests.get(faults.url + "/health", timeout=CLIENT_TIMEOUT_S)


def test_postgresql_killed(faults: FaultStack):
    name = new_fault_event_type(faults.url, PARTITIONS)
    publisher, streamer = _load(faults, name)
    try:
        killed = time.monotonic()
        faults.kill("postgres")
        wait_until(lambda: any(a.status == 503 for a in _since(publisher.answers, killed)), 20,
                   what="a 503 for publishing")
        wait_until(lambda: any(a.status == 503 for a in _since(streamer.answers, killed)), 20,
                   what="a 503 for opening a stream")
        health = _health(faults)
        assert health.status_code == 503 and "postgresql is down" in health.json()["detail"]
        restarting = time.monotonic()
        faults.restart("postgres")
        up = time.monotonic()
        wait_until(lambda: publisher.ok_since(up) and streamer.opened_since(up), 30,
                   what="serving again")
    finally:
        publisher.stop()
        streamer.stop()
    unavailable = _assert_outage_answers(
        _since(publisher.answers, killed) + _since(streamer.answers, killed), "PostgreSQL")
    # Streams open when PostgreSQL died ended with a last line saying why (or normally).
    for last in streamer.last_lines:
        assert "cursor" in last
    _figures("PostgreSQL kill -9", killed, unavailable, restarting, up,
             max(_healed(publisher.answers, restarting), _healed(streamer.answers, restarting)))
    assert _health(faults).status_code == 200
    check_exactly_once_in_order(publisher.acknowledged,
                                read_everything(faults.url, name, PARTITIONS))


def test_postgresql_frozen(faults: FaultStack):
    """A PostgreSQL that hangs (every process stopped: connections open, nothing
    answers) is an outage within the database timeout, not requests held for good."""
    name = new_fault_event_type(faults.url, PARTITIONS)
    publisher = Publisher(faults.url, name, timeout_s=FROZEN_CLIENT_TIMEOUT_S)
    streamer = Streamer(faults.url, name, timeout_s=FROZEN_CLIENT_TIMEOUT_S)
    publisher.start()
    streamer.start()
    try:
        wait_until(lambda: publisher.ok_since(0) and streamer.opened_since(0), 20,
                   what="publishing and streaming")
        with faults.frozen("postgres"):
            frozen = time.monotonic()
            wait_until(lambda: len([a for a in _since(publisher.answers, frozen)
                                    if a.status == 503]) >= 3, 30, what="503s for publishing")
            wait_until(lambda: any(a.status == 503 for a in _since(streamer.answers, frozen)),
                       30, what="a 503 for opening a stream")
            restarting = time.monotonic()
        up = time.monotonic()
        wait_until(lambda: publisher.ok_since(up) and streamer.opened_since(up), 30,
                   what="serving again")
    finally:
        publisher.stop()
        streamer.stop()
    answers = _since(publisher.answers, frozen) + _since(streamer.answers, frozen)
    unavailable = _assert_outage_answers(answers, "PostgreSQL")
    _figures("PostgreSQL frozen (SIGSTOP)", frozen, unavailable, restarting, up,
             min(_healed(publisher.answers, restarting), _healed(streamer.answers, restarting)))
    slowest = max(answer.took for answer in answers)
    assert slowest < FROZEN_ANSWER_BOUND_S, f"an answer took {slowest:.1f} s"
    check_exactly_once_in_order(publisher.acknowledged,
                                read_everything(faults.url, name, PARTITIONS))


def test_zookeeper_killed(faults: FaultStack):
    name = new_fault_event_type(faults.url, PARTITIONS)
    publisher, streamer = _load(faults, name)
    try:
        killed = time.monotonic()
        faults.kill("zookeeper")
        wait_until(lambda: any(a.status == 503 for a in _since(streamer.answers, killed)), 20,
                   what="a 503 for opening a stream")
        health = _health(faults)
        assert health.status_code == 503 and "zookeeper is down" in health.json()["detail"]
        # Publishing does not need ZooKeeper: it goes on.
        during = time.monotonic()
        wait_until(lambda: publisher.ok_since(during), 10, what="publishing during the outage")
        restarting = time.monotonic()
        faults.restart("zookeeper")
        up = time.monotonic()
        wait_until(lambda: streamer.opened_since(up), 30, what="streams opening again")
    finally:
        publisher.stop()
        streamer.stop()
    unavailable = _assert_outage_answers(_since(streamer.answers, killed), "ZooKeeper")
    _assert_outage_answers(_since(publisher.answers, killed), "ZooKeeper")
    _figures("ZooKeeper kill -9", killed, unavailable, restarting, up,
             _healed(streamer.answers, restarting))
    wait_until(lambda: _health(faults).status_code == 200, 10, what="health")
    # Each worker reconnects on its own: the one that answers may still be at it.
    check_exactly_once_in_order(publisher.acknowledged,
                                read_everything(faults.url, name, PARTITIONS,
                                                unavailable_for_s=10))


def test_gunicorn_worker_killed(faults: FaultStack):
    name = new_fault_event_type(faults.url, PARTITIONS)
    publisher, streamer = _load(faults, name)
    try:
        before = set(worker_pids(faults.gunicorn.pid))
        victim = sorted(before)[0]
        killed = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: len(set(worker_pids(faults.gunicorn.pid)) - before) == 1, 30,
                   what="gunicorn starting a new worker")
        replaced = time.monotonic()
        wait_until(lambda: publisher.ok_since(replaced) and streamer.opened_since(replaced), 30,
                   what="serving on")
    finally:
        publisher.stop()
        streamer.stop()
    # The connections the dead worker held fail; nothing answers a 5xx.
    for answer in _since(publisher.answers, killed) + _since(streamer.answers, killed):
        assert answer.status in (200, None), answer
        assert answer.error != "ReadTimeout", answer
    failed = [a for a in _since(publisher.answers, killed) if a.status is None]
    print(f"\nworker kill -9: a new worker {replaced - killed:.2f} s after the kill;"
          f" {len(failed)} publish requests lost their connection")
    check_exactly_once_in_order(publisher.acknowledged,
                                read_everything(faults.url, name, PARTITIONS))


def test_kafka_broker_stopped(faults: FaultStack):
    name = new_fault_event_type(faults.url, PARTITIONS)
    move_to(faults.url, name, "kafka")
    publisher, streamer = _load(faults, name)
    try:
        killed = time.monotonic()
        faults.kill("broker")
        wait_until(lambda: any(a.status == 503 for a in _since(publisher.answers, killed)), 30,
                   what="a 503 for publishing")
        wait_until(lambda: any(a.status == 503 for a in _since(streamer.answers, killed)), 20,
                   what="a 503 for opening a stream")
        health = _health(faults)
        assert health.status_code == 503 and "storage:kafka is down" in health.json()["detail"]
        publisher.stop()
        streamer.stop()
        restarting = time.monotonic()
        faults.restart("broker")
        up = time.monotonic()
        # Tansu lost its topics: publishing recovers for an event type made now.
        wait_until(lambda: _health(faults).status_code == 200, 30, what="health")
        fresh = new_fault_event_type(faults.url, PARTITIONS)
        move_to(faults.url, fresh, "kafka")
        after = Publisher(faults.url, fresh)
        after.start()
        wait_until(lambda: after.ok_since(up), 30, what="publishing again")
        after.stop()
    finally:
        publisher.stop()
        streamer.stop()
    unavailable = _assert_outage_answers(
        [a for a in _since(publisher.answers, killed) + _since(streamer.answers, killed)
         if a.started < restarting], "Kafka")
    _figures("Kafka broker kill", killed, unavailable, restarting, up,
             _healed(after.answers, restarting))
    check_exactly_once_in_order(after.acknowledged,
                                read_everything(faults.url, fresh, PARTITIONS))
