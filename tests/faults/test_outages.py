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

import contextlib
import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest
import requests
from confluent_kafka.admin import AdminClient

from app.repository.database import ANSWER_MARGIN_S
from app.storage.kafka.availability import PROBE_INTERVAL_S, PROBE_TIMEOUT_S
from tests.api.conftest import worker_pids
from tests.faults.conftest import (
    DATABASE_TIMEOUT_S,
    KAFKA_TIMEOUT_S,
    ZOOKEEPER_TIMEOUT_S,
    FaultStack,
)
from tests.helpers.broker import business_event
from tests.helpers.load import (
    CLIENT_TIMEOUT_S,
    Answer,
    Publisher,
    Streamer,
    answer_to,
    check_exactly_once_in_order,
    new_fault_event_type,
    read_everything,
)
from tests.helpers.timelines import move_to, switch_timeline
from tests.helpers.waiting import wait_until

PARTITIONS = 4


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
    print(f"\n{what}: first 503 {first:.2f} s after it went down, slowest 503"
          f" {slowest:.3f} s, {len(unavailable)} answered 503; bringing it back took"
          f" {up - restarting:.2f} s; serving again {healed - up:+.2f} s after it was back")


@contextmanager
def _loaded(faults: FaultStack, name: str, timeout_s: float = CLIENT_TIMEOUT_S
            ) -> Iterator[tuple[Publisher, Streamer]]:
    """Publishing to and streaming from the event type while the block runs, both seen
    working first; stopped when it ends."""
    publisher = Publisher(faults.url, name, timeout_s=timeout_s)
    streamer = Streamer(faults.url, name, timeout_s=timeout_s)
    publisher.start()
    streamer.start()
    try:
        wait_until(lambda: publisher.ok_since(0) and streamer.opened_since(0), 20,
                   what="publishing and streaming")
        yield publisher, streamer
    finally:
        publisher.stop()
        streamer.stop()


def _health(faults: FaultStack) -> requests.Response:
    return requests.get(faults.url + "/health", timeout=CLIENT_TIMEOUT_S)


def _publish_on_a_new_connection(url: str, name: str) -> Answer:
    """One event, on a connection of its own (so either worker may take it)."""
    started = time.monotonic()
    return answer_to(started, requests.post(f"{url}/event-types/{name}/events",
                                            json=[business_event()], timeout=CLIENT_TIMEOUT_S))


def _live(faults: FaultStack) -> bool:
    """Whether ``/health/live``, what the deploy files' probes ask, answers 200."""
    return requests.get(faults.url + "/health/live", timeout=CLIENT_TIMEOUT_S).status_code == 200


def test_postgresql_killed(faults: FaultStack):
    name = new_fault_event_type(faults.url, PARTITIONS)
    with _loaded(faults, name) as (publisher, streamer):
        killed = time.monotonic()
        faults.kill("postgres")
        wait_until(lambda: any(a.status == 503 for a in _since(publisher.answers, killed)), 20,
                   what="a 503 for publishing")
        wait_until(lambda: any(a.status == 503 for a in _since(streamer.answers, killed)), 20,
                   what="a 503 for opening a stream")
        health = _health(faults)
        assert health.status_code == 503 and "postgresql is down" in health.json()["detail"]
        assert health.json()["dependencies"]["postgresql"] == "down"  # as README's table says
        assert _live(faults)  # asks no dependency
        restarting = time.monotonic()
        faults.restart("postgres")
        up = time.monotonic()
        wait_until(lambda: publisher.ok_since(up) and streamer.opened_since(up), 30,
                   what="serving again")
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


def _frozen(faults: FaultStack, service: str, dependency: str, bound_s: float,
            storage: str | None = None) -> None:
    """Publish and stream while every process of ``service`` is stopped (SIGSTOP: its
    connections stay open, nothing answers): each answer is a 200 or a 503 naming
    ``dependency`` within ``bound_s``; both work again at once after SIGCONT, and
    every acknowledged event is there."""
    name = new_fault_event_type(faults.url, PARTITIONS)
    if storage is not None:
        move_to(faults.url, name, storage)
    # A client timeout beyond the bound, so that a slow answer is measured.
    with _loaded(faults, name, 3 * bound_s) as (publisher, streamer):
        with faults.frozen(service):
            frozen = time.monotonic()
            wait_until(lambda: any(a.status == 503 for a in _since(streamer.answers, frozen)),
                       30, what="a 503 for opening a stream")
            wait_until(lambda: len(_since(publisher.answers, frozen)) >= 3, 30,
                       what="answers to publishing")
            thawing = time.monotonic()
        wait_until(lambda: publisher.ok_since(thawing) and streamer.opened_since(thawing), 30,
                   what="serving again")
    answers = _since(publisher.answers, frozen) + _since(streamer.answers, frozen)
    unavailable = _assert_outage_answers(answers, dependency)
    # A publish that waited in vain may be stored when the service returns: a retry
    # would store it twice, and the client must be told.
    for answer in _since(publisher.answers, frozen):
        if answer.status == 503 and "within" in answer.detail:
            assert "may be" in answer.detail, answer
    _figures(f"{dependency} frozen (SIGSTOP)", frozen, unavailable, thawing, thawing,
             min(_healed(publisher.answers, thawing), _healed(streamer.answers, thawing)))
    slowest = max(answer.took for answer in answers)
    assert slowest < bound_s, f"an answer took {slowest:.1f} s"
    # Each worker reconnects on its own: the one that answers may still be at it.
    check_exactly_once_in_order(publisher.acknowledged,
                                read_everything(faults.url, name, PARTITIONS,
                                                unavailable_for_s=10))


def test_postgresql_frozen(faults: FaultStack):
    """A request makes at most two waits that run out while PostgreSQL hangs: one for
    an answer on a connection it had (the database timeout and the margin), one for a
    new connection (the connect timeout), or two for answers."""
    _frozen(faults, "postgres", "PostgreSQL",
            2 * (float(DATABASE_TIMEOUT_S) + ANSWER_MARGIN_S) + 1)


def test_zookeeper_frozen(faults: FaultStack):
    """Stream openings are refused within the ZooKeeper timeout; publishing goes on."""
    _frozen(faults, "zookeeper", "ZooKeeper", 2 * float(ZOOKEEPER_TIMEOUT_S) + 1)


def test_kafka_broker_frozen(faults: FaultStack):
    """Unlike a kill, a stopped Tansu keeps its topics: nothing acknowledged is lost."""
    _frozen(faults, "broker", "Kafka", 2 * float(KAFKA_TIMEOUT_S) + 1, storage="kafka")


def test_zookeeper_killed(faults: FaultStack):
    name = new_fault_event_type(faults.url, PARTITIONS)
    with _loaded(faults, name) as (publisher, streamer):
        killed = time.monotonic()
        faults.kill("zookeeper")
        wait_until(lambda: any(a.status == 503 for a in _since(streamer.answers, killed)), 20,
                   what="a 503 for opening a stream")
        health = _health(faults)
        assert health.status_code == 503 and "zookeeper is down" in health.json()["detail"]
        dependencies = health.json()["dependencies"]
        assert dependencies["zookeeper"] == "down" and dependencies["postgresql"] == "up"
        assert _live(faults)  # probes keep the instance, which still publishes
        # Publishing does not need ZooKeeper: it goes on.
        during = time.monotonic()
        wait_until(lambda: publisher.ok_since(during), 10, what="publishing during the outage")
        restarting = time.monotonic()
        faults.restart("zookeeper")
        up = time.monotonic()
        wait_until(lambda: streamer.opened_since(up), 30, what="streams opening again")
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
    with _loaded(faults, name) as (publisher, streamer):
        before = set(worker_pids(faults.gunicorn.pid))
        victim = sorted(before)[0]
        killed = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: len(set(worker_pids(faults.gunicorn.pid)) - before) == 1, 30,
                   what="gunicorn starting a new worker")
        replaced = time.monotonic()
        wait_until(lambda: publisher.ok_since(replaced) and streamer.opened_since(replaced), 30,
                   what="serving on")
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
    with _loaded(faults, name) as (publisher, streamer):
        killed = time.monotonic()
        faults.kill("broker")
        wait_until(lambda: any(a.status == 503 for a in _since(publisher.answers, killed)), 30,
                   what="a 503 for publishing")
        wait_until(lambda: any(a.status == 503 for a in _since(streamer.answers, killed)), 20,
                   what="a 503 for opening a stream")
        health = _health(faults)
        assert health.status_code == 503 and "storage:kafka is down" in health.json()["detail"]
        assert _live(faults)  # probes keep the instance: postgres event types still work
        publisher.stop()
        streamer.stop()
        restarting = time.monotonic()
        faults.restart("broker")
        up = time.monotonic()
        # Tansu lost its topics: publishing recovers for an event type made now.
        wait_until(lambda: _health(faults).status_code == 200, 30, what="health")
        fresh = new_fault_event_type(faults.url, PARTITIONS)
        _move_to_kafka_once_back(faults.url, fresh)
        after = Publisher(faults.url, fresh)
        after.start()
        wait_until(lambda: after.ok_since(up), 30, what="publishing again")
        after.stop()
        # The event type made before has no topic now: its publishes are told so at once
        # (until 2026-11-29 each waited NAKADI_KAFKA_TIMEOUT_S out for a 503).
        lost = [_publish_one(faults.url, name) for _ in range(6)]
    unavailable = _assert_outage_answers(
        [a for a in _since(publisher.answers, killed) + _since(streamer.answers, killed)
         if a.started < restarting], "Kafka")
    _figures("Kafka broker kill", killed, unavailable, restarting, up,
             _healed(after.answers, restarting))
    # Each worker learns by its own probe that the broker is back, up to a second later.
    check_exactly_once_in_order(after.acknowledged, read_everything(
        faults.url, fresh, PARTITIONS, unavailable_for_s=PROBE_INTERVAL_S + 2))
    # Only at once: a fast 503 is a worker that has not yet probed the broker back.
    assert all(answer.took < 2 for answer, _ in lost), lost
    told = [body[0]["detail"] for answer, body in lost if answer.status == 207]
    assert told and all("the topic does not exist" in detail for detail in told), lost
    assert all(answer.status in (207, 503) for answer, _ in lost), lost


def _move_to_kafka_once_back(url: str, name: str) -> None:
    """Switch the event type to kafka just after the broker restarted: ``/health`` may
    have been answered by a worker that saw the broker back, while the one creating
    the topic refuses (a 503) until its own probe does, up to a second later."""
    wait_until(lambda: switch_timeline(url, name, "kafka").status_code == 201, 30,
               what="a timeline on kafka")


def _publish_one(url: str, name: str) -> tuple[Answer, list]:
    """One event on a connection of its own (so on any worker): its answer and body."""
    started = time.monotonic()
    response = requests.post(f"{url}/event-types/{name}/events", json=[business_event()],
                             headers={"Connection": "close"}, timeout=CLIENT_TIMEOUT_S)
    return answer_to(started, response), response.json() if response.content else []


def test_event_types_made_while_the_kafka_broker_hangs_are_refused_fast_and_leave_no_topic(
        faults: FaultStack):
    """Creating a topic asked the broker whatever it knew: each creation waited out
    NAKADI_KAFKA_TIMEOUT_S for as long as the broker hung. And the creations it never
    answered were carried out once it resumed, leaving topics no event type uses."""
    body = {"owning_application": "faults", "category": "undefined",
            "schema": {"type": "json_schema", "schema": "{}"}}

    def create() -> Answer:
        started = time.monotonic()
        return answer_to(started, requests.post(
            faults.url + "/event-types", json=dict(body, name=f"faults.made-{started}"),
            timeout=CLIENT_TIMEOUT_S * 3))

    admin = AdminClient({"bootstrap.servers": faults.env["NAKADI_KAFKA_BOOTSTRAP_SERVERS"],
                         "log_level": 2})  # its lines when the stack stops are not errors

    def unused_topics() -> set[str]:
        used = {topic for (topic,) in faults.rows("SELECT topic FROM timelines")}
        return set(admin.list_topics(timeout=5).topics) - used - {"__consumer_offsets"}

    bound_s = 2 * float(KAFKA_TIMEOUT_S) + 1
    assert requests.put(faults.url + "/storages/default/kafka").status_code == 200
    try:
        wait_until(lambda: create().status == 201, 30, what="creating event types on kafka")
        unused_before = unused_topics()
        answers = []
        with faults.frozen("broker"):
            frozen = time.monotonic()
            while time.monotonic() - frozen < 2 * bound_s:
                answers.append(create())
        wait_until(lambda: create().status == 201, 30, what="creating event types again")
    finally:
        assert requests.put(faults.url + "/storages/default/postgres").status_code == 200
    assert all(answer.status == 503 for answer in answers), answers
    waited = [answer.took for answer in answers if answer.took > 1.5]
    assert len(waited) <= 2, f"{len(waited)} of {len(answers)} creations waited: {waited}"
    # The sweep removes the topics the broker may have created after all.
    wait_until(lambda: unused_topics() <= unused_before, 20, what="no unused topic")


def test_after_the_kafka_broker_restarts_no_publish_waits_for_a_forgotten_producer(
        faults: FaultStack):
    """Tansu forgets its producer ids when it restarts, and an idempotent producer that
    keeps its own is never acknowledged again: each worker's first publish after the
    restart waited out NAKADI_KAFKA_TIMEOUT_S and was a 503, and only then did the
    worker replace its producer. Now a report that every broker is down retires the
    producer, and a new one starts as soon as the broker answers again."""
    name = new_fault_event_type(faults.url, PARTITIONS)
    move_to(faults.url, name, "kafka")
    # Both workers have published (each has a producer), ten in a row on new connections.
    wait_until(lambda: all(_publish_on_a_new_connection(faults.url, name).status == 200
                           for _ in range(10)), 30, what="publishing on both workers")
    faults.kill("broker")
    time.sleep(1)
    faults.restart("broker")
    up = time.monotonic()
    wait_until(lambda: _health(faults).status_code == 200, 30, what="health")
    fresh = new_fault_event_type(faults.url, PARTITIONS)  # Tansu lost the topics
    _move_to_kafka_once_back(faults.url, fresh)
    # Each worker learns on its own that the broker is back, asking once a second since
    # the outage began.
    time.sleep(max(0.0, up + 2 * PROBE_INTERVAL_S + PROBE_TIMEOUT_S - time.monotonic()))
    answers = [_publish_on_a_new_connection(faults.url, fresh) for _ in range(20)]
    assert all(answer.status == 200 and answer.took < 1.0 for answer in answers), answers


def test_publishing_to_kafka_goes_on_quickly_while_postgresql_hangs(faults: FaultStack):
    """Only postgres event types depend on PostgreSQL to publish. The security settings
    are re-read every 10 s: retried by each request once a read failed, every publish
    then waited out the database's timeout (~4 s)."""
    name = new_fault_event_type(faults.url, PARTITIONS)
    move_to(faults.url, name, "kafka")
    session = requests.Session()

    def publish() -> tuple[int, float]:
        started = time.monotonic()
        response = session.post(f"{faults.url}/event-types/{name}/events",
                                json=[business_event()], timeout=CLIENT_TIMEOUT_S)
        return response.status_code, time.monotonic() - started

    # The Kafka broker may still be coming back from the test before (it kills it).
    wait_until(lambda: publish()[0] == 200, 30, what="publishing to kafka")
    with faults.frozen("postgres"):
        frozen = time.monotonic()
        answers = []
        while time.monotonic() - frozen < 25:  # well past the settings' 10 s
            answers.append(publish())
    assert {status for status, _ in answers} == {200}
    slow = [took for _, took in answers if took > 1.0]
    # The first read after the reading aged waits once in each worker; then none does
    # (measured: 1 slow of 4,062 publishes; before, 4 of 1,963, one every ~4 s).
    assert len(slow) <= 2, f"{len(slow)} of {len(answers)} publishes took over 1 s: {slow}"


def test_streams_open_through_a_postgresql_hang_go_on_once_it_resumes(faults: FaultStack):
    """While PostgreSQL hangs, open streams wait, sending keep-alives. A publish sent
    during the hang is done by the server once it resumes, and its notification woke the
    streams into reads that the pool still refused (it had seen the hang, and its probe
    takes a few milliseconds more): every stream on such a worker ended with "PostgreSQL
    hangs" at the moment the outage was over (measured: in 2 of 3 runs before 2026-11-29)."""
    name = new_fault_event_type(faults.url, PARTITIONS)
    published = requests.post(f"{faults.url}/event-types/{name}/events",
                              json=[business_event()], timeout=CLIENT_TIMEOUT_S)
    assert published.status_code == 200
    streams = [requests.get(f"{faults.url}/event-types/{name}/events", stream=True,
                            params={"batch_flush_timeout": "1", "stream_timeout": "60"},
                            timeout=CLIENT_TIMEOUT_S) for _ in range(3)]  # the most allowed
    assert [stream.status_code for stream in streams] == [200] * 3
    lines: list[list[dict]] = [[] for _ in streams]

    def read(stream: requests.Response, into: list[dict]) -> None:
        # Until the stream ends or fails, or the test closes it under the thread.
        with contextlib.suppress(Exception):
            into.extend(json.loads(line) for line in stream.iter_lines() if line)

    readers = [threading.Thread(target=read, args=pair, daemon=True)
               for pair in zip(streams, lines, strict=True)]
    for reader in readers:
        reader.start()
    wait_until(lambda: all(lines), 10, what="the first lines of every stream")

    def publish() -> int:  # on a new connection each: both workers see the hang
        # A publish makes at most two waits that run out (test_postgresql_frozen).
        return requests.post(f"{faults.url}/event-types/{name}/events",
                             json=[business_event()], timeout=30).status_code

    with faults.frozen("postgres"), ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: publish(), range(8)))
    assert set(statuses) == {503}
    time.sleep(2)  # what the resumed server did reaches the streams
    assert all(reader.is_alive() for reader in readers), \
        [stream_lines[-1] for stream_lines in lines]
    wait_until(lambda: publish() == 200, 10, what="publishing again")
    wait_until(lambda: all(any("events" in line for line in stream_lines)
                           for stream_lines in lines), 10,
               what="events in every stream (they start at the end) after the hang")
    for stream in streams:
        stream.close()
    for reader in readers:
        reader.join(5)


def test_concurrent_publishes_while_postgresql_hangs_fail_together_and_never_twice(
        faults: FaultStack):
    """A statement that several publishes share, sent before PostgreSQL hung, may run
    when it resumes. Its publishes used to be written again one by one, each waiting
    out the timeout while the rest queued (30 of them answered one every 5 s, the last
    after 97 s), and a rewrite that went through stored events twice, acknowledged."""
    name = new_fault_event_type(faults.url, 1)
    bound_s = 2 * (float(DATABASE_TIMEOUT_S) + ANSWER_MARGIN_S) + 1
    publishers = [Publisher(faults.url, name, batch=1, timeout_s=3 * bound_s)
                  for _ in range(24)]
    for publisher in publishers:
        publisher.start()
    try:
        wait_until(lambda: all(p.ok_since(0) for p in publishers), 20, what="publishing")
        with faults.frozen("postgres"):
            frozen = time.monotonic()
            time.sleep(2 * bound_s)
            thawing = time.monotonic()
        wait_until(lambda: all(p.ok_since(thawing) for p in publishers), 30,
                   what="publishing again")
    finally:
        for publisher in publishers:
            publisher.stop()
    answers = [a for p in publishers for a in _since(p.answers, frozen) if a.started < thawing]
    _assert_outage_answers(answers, "PostgreSQL")
    slowest = max(answer.took for answer in answers)
    assert slowest < bound_s, f"an answer took {slowest:.1f} s"
    stored = [event["metadata"]["eid"]
              for events in read_everything(faults.url, name, 1, unavailable_for_s=10).values()
              for event in events]
    acknowledged = [eid for p in publishers for eid in p.acknowledged]
    twice = [eid for eid, count in Counter(stored).items() if count > 1 and eid in acknowledged]
    assert not twice, f"{len(twice)} acknowledged events were stored twice"
    assert set(acknowledged) <= set(stored)


def test_while_postgresql_hangs_requests_after_the_first_wait_are_refused_at_once(
        faults: FaultStack):
    """Every request of a hang that lasted waited out the timeout again (5-12 s each
    with the default settings); now each worker's first wait that runs out makes its
    pool refuse at once until PostgreSQL answers its probe again."""
    name = new_fault_event_type(faults.url, PARTITIONS)
    session = requests.Session()
    bound_s = 2 * (float(DATABASE_TIMEOUT_S) + ANSWER_MARGIN_S) + 1

    def ask(method: str, path: str, **kwargs) -> Answer:
        started = time.monotonic()
        return answer_to(started, session.request(method, faults.url + path,
                                                  timeout=3 * bound_s, **kwargs))

    def publish() -> Answer:
        return ask("POST", f"/event-types/{name}/events", json=[business_event()])

    wait_until(lambda: publish().status == 200, 30, what="publishing")
    answers = []
    with faults.frozen("postgres"):
        frozen = time.monotonic()
        while time.monotonic() - frozen < 2 * bound_s:
            answers += [publish(), ask("GET", f"/event-types/{name}/partitions")]
        thawing = time.monotonic()
    _assert_outage_answers(answers, "PostgreSQL")
    assert all(answer.status == 503 for answer in answers)
    slow = [answer.took for answer in answers if answer.took > 1]
    # At most a wait or two per worker before its pool knows; the rest at once.
    assert len(slow) <= 4, f"{len(slow)} of {len(answers)} answers took over 1 s: {slow}"
    assert len(answers) >= 20, f"{len(answers)} answers in {2 * bound_s:g} s: {slow}"
    assert max(slow) < bound_s
    wait_until(lambda: publish().status == 200, 10, what="publishing again")
    print(f"\nPostgreSQL frozen: {len(answers)} answers, {len(slow)} slow;"
          f" publishing again {time.monotonic() - thawing:.2f} s after it was back")


@pytest.mark.parametrize("request_kind", ["publish", "partitions"])
def test_while_the_kafka_broker_hangs_requests_after_the_first_wait_are_refused_fast(
        faults: FaultStack, request_kind: str):
    """A broker that hangs keeps its connections, and librdkafka reports nothing: every
    publish to a kafka event type waited out NAKADI_KAFKA_TIMEOUT_S (10 s each with the
    default settings) for as long as it hung, and until 2026-11-29 so did every read of
    its partitions (their metadata request went unnoticed). Now, once a request waited
    it out, the engine refuses at once, one caller a second asking the broker again (1 s
    at most)."""
    name = new_fault_event_type(faults.url, PARTITIONS)
    move_to(faults.url, name, "kafka")
    session = requests.Session()
    bound_s = 2 * float(KAFKA_TIMEOUT_S) + 1

    def ask() -> Answer:
        started = time.monotonic()
        if request_kind == "publish":
            return answer_to(started, session.post(f"{faults.url}/event-types/{name}/events",
                                                   json=[business_event()],
                                                   timeout=3 * bound_s))
        return answer_to(started, session.get(f"{faults.url}/event-types/{name}/partitions",
                                              timeout=3 * bound_s))

    wait_until(lambda: ask().status == 200, 30, what=f"{request_kind} on kafka")
    answers = []
    with faults.frozen("broker"):
        frozen = time.monotonic()
        while time.monotonic() - frozen < 2 * bound_s:
            answers.append(ask())
        thawing = time.monotonic()
    _assert_outage_answers(answers, "Kafka")
    waited = [answer.took for answer in answers if answer.took > 1.5]
    # Each worker waits the timeout out once; then at most a probe's second at a time.
    assert len(waited) <= 2, f"{len(waited)} of {len(answers)} answers waited: {waited}"
    assert len(answers) >= 20, f"{len(answers)} answers in {2 * bound_s:g} s: {waited}"
    wait_until(lambda: ask().status == 200, 15, what=f"{request_kind} again")
    print(f"\nKafka broker frozen, {request_kind}: {len(answers)} answers, {len(waited)} "
          f"waited; serving again {time.monotonic() - thawing:.2f} s after it was back")
