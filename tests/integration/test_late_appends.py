"""Publishes of a process that a timeline switch could not wait for (its ZooKeeper
session lost): what they append past the old timeline's recorded end is appended
again to the new timeline, and a check waits for a switch reading the ends.
Readers that were reading the old timeline live leave those events out."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import gevent
import gevent.event
import pytest

from app import services as services_module
from app.domain.timeline import Timeline
from app.publishing import late_appends
from app.publishing.late_appends import checked_append
from app.publishing.publisher import publish
from app.registry import operations
from app.registry.timelines import create_timeline
from app.repository import timelines as repository_timelines
from app.repository.timelines import recorded_end, switch_timeline
from app.services import Services
from app.storage.across_timelines import (
    TimelinesReader,
    timelines_bounds,
    timelines_newest_at_least,
)
from app.storage.engine import EventRun
from tests.helpers.storage import create_event_type, kafka_topic
from tests.helpers.waiting import wait_until


def _services(settings) -> Iterator[Services]:
    built = Services(settings)
    built.publishing_gate.start()
    yield built
    built.close()


@pytest.fixture
def switcher(settings, pool) -> Iterator[Services]:
    """The process that switches timelines (``pool`` registered the storages)."""
    yield from _services(settings)


@pytest.fixture
def stale(settings, pool) -> Iterator[Services]:
    """Another process, in step with the switches until a test cuts it off."""
    yield from _services(settings)


def in_step(services: Services, timeout_s: float = 10.0) -> None:
    """Wait until a publish starting now could not miss a switch."""
    deadline = time.monotonic() + timeout_s
    while True:
        with services.publishing_gate.publishing("any") as missed_switch:
            if not missed_switch():
                return
        assert time.monotonic() < deadline, "the process never got in step with the switches"
        gevent.sleep(0.05)


def event_type_in_step(switcher: Services, stale: Services, source: str | None = None
                       ) -> tuple[str, Timeline]:
    """A new event type, its active timeline in ``source`` (else the default storage),
    and both processes in step with the switches: its name and that timeline."""
    name = create_event_type(switcher, "late")
    if source is not None and \
            switcher.event_types.get(name)[1].active.storage_id != source:  # type: ignore[index]
        create_timeline(switcher, name, source)
    in_step(switcher)
    in_step(stale)
    return name, stale.event_types.get(name)[1].active  # type: ignore[index]


def publish_with(services: Services, name: str, timeline: Timeline, numbers: range) -> None:
    """Publish as a request of ``services``'s process that looked the event type up
    when ``timeline`` was active."""
    event_type = services.event_types.get(name)[0]  # type: ignore[index]
    with services.publishing_gate.publishing(name) as missed_switch:
        items = publish(event_type, timeline, checked_append(services, timeline, missed_switch),
                        [{"n": n} for n in numbers], None, "late-appends-test")
    assert [item.status for item in items] == ["submitted"] * len(numbers)


def numbers_in(services: Services, timeline: Timeline, last: tuple[int, ...] | None) -> list[int]:
    """The events of the timeline that readers see: up to its recorded end, if closed."""
    engine = services.engines.get(timeline.storage_id)
    found = []
    for partition in range(timeline.partitions):
        for event in engine.read(timeline.topic, partition, -1, 100):
            if last is None or event.offset <= last[partition]:
                found.append(json.loads(event.payload)["n"])
    return sorted(found)


@pytest.mark.parametrize(("source", "target"), [("postgres", "kafka"), ("kafka", "postgres")])
def test_events_appended_past_the_recorded_end_are_moved_to_the_new_timeline(
        switcher, stale, source, target):
    name, old = event_type_in_step(switcher, stale, source)
    stale.zookeeper.stop()  # its session ends, its node goes: switches stop waiting for it

    publish_with(stale, name, old, range(0, 4))  # before the switch: inside the end
    new = create_timeline(switcher, name, target)
    publish_with(stale, name, old, range(4, 10))  # looked up before, appended after

    last = recorded_end(switcher.pool, old)
    assert last is not None
    assert numbers_in(switcher, old, last) == [0, 1, 2, 3]
    assert numbers_in(switcher, new, None) == [4, 5, 6, 7, 8, 9]


def test_late_events_of_a_compacted_event_type_keep_their_keys(switcher, stale, pool):
    """Kafka compacts by record key: moved without theirs, the late events would be
    records Kafka refuses in a compacted topic."""
    name = f"late-compact-{uuid.uuid4().hex[:12]}"
    operations.create(switcher, {
        "name": name, "owning_application": "tests", "category": "business",
        "cleanup_policy": "compact", "enrichment_strategies": ["metadata_enrichment"],
        "schema": {"type": "json_schema", "schema": json.dumps({"type": "object"})},
        "default_statistic": {"messages_per_minute": 1, "message_size": 1,
                              "read_parallelism": 2, "write_parallelism": 2}})
    if switcher.event_types.get(name)[1].active.storage_id != "postgres":  # type: ignore[index]
        create_timeline(switcher, name, "postgres")
    in_step(switcher)
    in_step(stale)
    event_type, timelines = stale.event_types.get(name)  # type: ignore[misc]
    old = timelines.active
    stale.zookeeper.stop()
    new = create_timeline(switcher, name, "kafka")
    keys = [f"key-{n % 3}" for n in range(6)]
    events = [{"metadata": {"eid": str(uuid.uuid4()), "occurred_at": "2026-11-27T10:00:00Z",
                            "partition_compaction_key": key}} for key in keys]
    with stale.publishing_gate.publishing(name) as missed_switch:
        items = publish(event_type, old, checked_append(stale, old, missed_switch), events,
                        None, "late-appends-test")
    assert [item.status for item in items] == ["submitted"] * len(events)
    config, moved_keys = kafka_topic(pool, "kafka", new.topic, new.partitions)
    assert config["cleanup.policy"] == "compact"
    assert sorted(moved_keys) == sorted(key.encode() for key in keys)


def numbered(runs: list[EventRun]) -> list[tuple[int, int, int]]:
    """(partition, position, number) of each event a reader gave."""
    return [(run.partition, run.first + index, json.loads(payload)["n"])
            for run in runs for index, payload in enumerate(run.payloads)]


def read_until(reader: TimelinesReader, count: int, timeout_s: float = 20.0
               ) -> list[tuple[int, int, int]]:
    got: list[tuple[int, int, int]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count:
        assert time.monotonic() < deadline, f"read {got}, {len(got)} of {count} events"
        got += numbered(reader.poll(100, 0.5))
    return got


@pytest.mark.parametrize(("source", "target"), [("postgres", "kafka"), ("kafka", "postgres")])
@pytest.mark.parametrize("reading", ["in step", "in step, from within the switch", "out of step"])
def test_a_live_reader_leaves_out_the_events_appended_past_the_recorded_end(
        switcher, stale, source, target, reading, monkeypatch):
    """A reader waiting for the old timeline's next events when the late ones land: in a
    process that saw the switch begin (its poll began before the switch, or during it),
    or in one out of step with the switches."""
    name, old = event_type_in_step(switcher, stale, source)
    process = stale if reading == "out of step" else switcher
    reader = TimelinesReader(process.engines.get, process.event_types.get(name)[1],  # type: ignore[index]
                             {0: -1, 1: -1}, process.switch_watch(name))
    stale.zookeeper.stop()
    publish_with(stale, name, old, range(0, 4))
    got = read_until(reader, 4)

    within = reading == "in step, from within the switch"
    if within:  # the switch takes a while, and the poll begins while it runs
        switch_timeline = repository_timelines.switch_timeline
        monkeypatch.setattr(repository_timelines, "switch_timeline",
                            lambda *args: gevent.sleep(0.5) or switch_timeline(*args))
        switching = gevent.spawn(create_timeline, switcher, name, target)
        wait_until(lambda: switcher.publishing_gate.reading(name)(), what="the switch to begin")
        waiting = gevent.spawn(reader.poll, 100, 30.0)
    else:
        waiting = gevent.spawn(reader.poll, 100, 30.0)
        gevent.sleep(0.3)
        switching = gevent.spawn(create_timeline, switcher, name, target)
    new = switching.get(timeout=30)
    publish_with(switcher, name, new, range(100, 104))
    assert not waiting.ready(), "the poll ended before the late events came"
    publish_with(stale, name, old, range(4, 10))  # appended past the end, then moved
    got += numbered(waiting.get(timeout=30))
    got += read_until(reader, 14 - len(got))
    reader.close()

    assert sorted(number for _, _, number in got) == [*range(10), *range(100, 104)]
    for partition in (0, 1):  # each position once, in order, none skipped
        positions = [position for p, position, _ in got if p == partition]
        assert positions == list(range(len(positions)))


@pytest.mark.parametrize("asking", ["in step", "out of step, before the switch's NOTIFY"])
def test_newest_offsets_leave_out_the_events_appended_past_the_recorded_end(
        switcher, stale, asking):
    """A request that looked the timelines up before the switch: streams from the newest
    offsets, and subscriptions from ``end``, would skip as many new events."""
    name, old = event_type_in_step(switcher, stale)
    process = switcher if asking == "in step" else stale
    cached = process.event_types.get(name)
    before = cached[1]  # type: ignore[index]
    stale.zookeeper.stop()
    publish_with(stale, name, old, range(0, 4))
    create_timeline(switcher, name, "postgres")
    publish_with(stale, name, old, range(4, 10))  # appended past the end, then moved
    if process is stale:
        stale.event_types._entries[name] = cached  # type: ignore[assignment]

    last = recorded_end(switcher.pool, old)
    assert last is not None
    watch = process.switch_watch(name)
    bounds = timelines_bounds(process.engines.get, before, watch)
    assert [available.newest for available in bounds] == list(last)
    newest = timelines_newest_at_least(process.engines.get, before, watch)
    assert all(newest[partition] <= last[partition] for partition in (0, 1))


def test_checks_asked_for_at_once_share_a_query(stale, monkeypatch):
    """While ZooKeeper is away every publish and every stream's read checks: they must
    not hammer PostgreSQL with one query each."""
    name = create_event_type(stale, "late")
    timeline = stale.event_types.get(name)[1].active  # type: ignore[index]
    asked = []

    def counted(pool, timeline):
        asked.append(timeline.id)
        gevent.sleep(0.05)
        return None

    monkeypatch.setattr(services_module, "recorded_end", counted)
    checks = [gevent.spawn(stale.recorded_end, timeline) for _ in range(50)]
    gevent.joinall(checks, raise_error=True)
    assert [check.value for check in checks] == [None] * 50
    assert len(asked) <= 2


def test_a_process_back_in_step_drops_timelines_a_switch_it_missed_made_old(switcher, stale):
    """Its NOTIFY can come after the process is back: the cache must not be trusted."""
    name = create_event_type(switcher, "late")
    in_step(stale)
    cached = stale.event_types.get(name)
    client = stale.zookeeper
    client.stop()
    new = create_timeline(switcher, name, "postgres")
    wait_until(lambda: stale.event_types.get(name)[1].active == new)  # type: ignore[index]
    stale.event_types._entries[name] = cached  # as if the NOTIFY had not come yet
    client.start()
    in_step(stale)
    assert stale.event_types.get(name)[1].active == new  # type: ignore[index]


def test_a_publish_overlapping_a_lost_connection_says_it_may_have_missed_a_switch(stale):
    gate = stale.publishing_gate
    in_step(stale)
    with gate.publishing("any") as before, gate.publishing("other") as during:
        assert not during()
        stale.zookeeper.stop()
        gevent.sleep(0)
        assert during() and before()
    with gate.publishing("any") as after:
        assert after()


def test_a_check_waits_for_a_switch_that_is_reading_the_ends(switcher):
    name = create_event_type(switcher, "late")
    closing = switcher.event_types.get(name)[1].active  # type: ignore[index]
    reading, go = gevent.event.Event(), gevent.event.Event()

    def last_offsets() -> tuple[int, ...]:
        reading.set()
        go.wait(10)
        return (4, 7)

    switch = gevent.spawn(switch_timeline, switcher.pool, closing, last_offsets, "postgres",
                          f"unused-{uuid.uuid4().hex[:8]}")
    assert reading.wait(10)
    check = gevent.spawn(recorded_end, switcher.pool, closing)
    gevent.sleep(0.3)
    assert not check.ready(), "the check did not wait for the switch"
    go.set()
    switch.get(timeout=10)
    assert check.get(timeout=10) == (4, 7)
    assert recorded_end(switcher.pool, closing) == (4, 7)


def test_a_publish_that_keeps_landing_past_the_end_gives_up_on_those_partitions(
        switcher, stale, monkeypatch):
    name = create_event_type(switcher, "late")
    old = stale.event_types.get(name)[1].active  # type: ignore[index]
    stale.zookeeper.stop()
    checks = []

    def always_closed(timeline):  # as if each move met yet another switch
        checks.append(timeline.id)
        return (-1,) * timeline.partitions

    monkeypatch.setattr(stale, "recorded_end", always_closed)
    event_type = stale.event_types.get(name)[0]  # type: ignore[index]
    with stale.publishing_gate.publishing(name) as missed_switch:
        items = publish(event_type, old, checked_append(stale, old, missed_switch),
                        [{"n": n} for n in range(4)], None, "late-appends-test")
    assert len(checks) == late_appends.MAX_MOVES + 1
    assert {item.status for item in items} == {"failed"}
    assert "publish it again" in items[0].response()["detail"]
