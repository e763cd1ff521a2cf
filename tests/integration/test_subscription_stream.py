"""The subscription stream state machine against real ZooKeeper and each storage
engine, driven directly (no HTTP)."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime

import gevent
import gevent.queue
import pytest

from app.coordination.subscription_nodes import remove_subscription_state
from app.coordination.subscription_state import SubscriptionState
from app.domain.subscription import Subscription
from app.domain.timeline import Timeline, Timelines
from app.storage.engine import count_events, stored_events
from app.streaming.limits import StreamLimits
from app.subscriptions.partitions import SubscriptionPartitions, starting_offsets
from app.subscriptions.readers import FIRST_POLL_EVENTS, MAX_INBOX_EVENTS, MAX_POLL_EVENTS
from app.subscriptions.stream import SubscriptionStream
from app.subscriptions.stream_options import Phase, StreamRefused, SubscriptionStreamParams
from tests.helpers.waiting import wait_until

EVENT_TYPE = "orders"


@pytest.fixture
def timeline(engine, topic):
    return Timeline("t1", EVENT_TYPE, 1, engine.storage_type, topic, 3)


@pytest.fixture
def subscription(zookeeper):
    now = datetime.now(UTC)
    found = Subscription(str(uuid.uuid4()), "app", (EVENT_TYPE,), "default", "begin", now, now)
    yield found
    remove_subscription_state(zookeeper, found.id)


class Client:
    """A stream read by a greenlet, its lines in a queue."""

    def __init__(self, stream: SubscriptionStream) -> None:
        self.stream = stream
        self.lines: gevent.queue.Queue = gevent.queue.Queue()
        self.reader = gevent.spawn(self._read)

    def _read(self) -> None:
        lines = self.stream.lines()
        try:
            for chunk in lines:  # the lines of a turn come as one chunk
                for line in chunk.splitlines():
                    self.lines.put(json.loads(line))
        finally:
            lines.close()
            self.stream.end()
            self.lines.put(None)

    def batch(self, timeout: float = 10) -> dict | None:
        return self.lines.get(timeout=timeout)

    def events_batch(self) -> dict:
        while True:
            batch = self.batch()
            assert batch is not None, "the stream ended"
            if batch.get("events"):
                return batch

    def close(self) -> None:
        self.reader.kill()


def close_all(*clients: Client | None) -> None:
    """Close the streams together (each one's end runs in its reader greenlet)."""
    gevent.killall([client.reader for client in clients if client is not None])


def open_stream(zookeeper, engine, subscription, timeline, **params) -> Client:
    return Client(started_stream(zookeeper, engine, subscription, timeline, **params))


def started_stream(zookeeper, engine, subscription, timeline, **params) -> SubscriptionStream:
    """A stream past ``starting`` that has not taken its first turn yet."""
    partitions = SubscriptionPartitions({EVENT_TYPE: Timelines((timeline,))})
    limits = StreamLimits(**{k: params.pop(k) for k in list(params)
                             if k in StreamLimits.__dataclass_fields__})
    stream = SubscriptionStream(subscription, partitions,
                                SubscriptionState(zookeeper, subscription.id),
                                lambda _storage: engine,
                                SubscriptionStreamParams(limits, **params))
    bounds = {EVENT_TYPE: {b.partition: b for b in engine.bounds(timeline.topic)}}
    stream.start(lambda: starting_offsets(subscription, partitions, bounds))
    return stream


def on_every_reader(monkeypatch, engine, change) -> None:
    """Apply ``change`` to every storage reader the engine opens from now on."""
    open_reader = engine.reader

    def changed_reader(topic_name, positions):
        reader = open_reader(topic_name, positions)
        change(reader)
        return reader
    monkeypatch.setattr(engine, "reader", changed_reader)


def events_per_poll(monkeypatch, engine) -> list[int]:
    """How many events each poll of the readers the engine opens from now on brought."""
    read: list[int] = []

    def count_reads(reader):
        poll = reader.poll

        def counted(max_events, timeout):
            events = poll(max_events, timeout)
            read.append(count_events(events))
            return events
        reader.poll = counted

    on_every_reader(monkeypatch, engine, count_reads)
    return read


def append(engine, topic, partition: int, count: int) -> None:
    engine.append(topic, partition, [json.dumps({"n": n}).encode() for n in range(count)])


def commit(zookeeper, subscription, client: Client, batch) -> bool:
    """Commit the batch's cursor for the client's stream as another instance does: the
    stream learns of it through its watch on the announcements."""
    cursor = batch["cursor"]
    key = (cursor["event_type"], cursor["partition"])
    state = SubscriptionState(zookeeper, subscription.id)
    if not state.commit(key, cursor["offset"]):
        return False
    state.announce(client.stream.id, {key: cursor["offset"]})
    return True


def test_batches_carry_subscription_cursors_and_pause_until_committed(
        zookeeper, engine, topic, timeline, subscription):
    append(engine, topic, 0, 5)
    client = open_stream(zookeeper, engine, subscription, timeline, batch_limit=2,
                         batch_flush_timeout=1, max_uncommitted_events=2)
    try:
        first = client.events_batch()
        assert first["cursor"]["event_type"] == EVENT_TYPE
        assert first["cursor"]["partition"] == "0"
        assert first["cursor"]["offset"] == "001-0001-000000000000000001"
        uuid.UUID(first["cursor"]["cursor_token"])
        assert [e["n"] for e in first["events"]] == [0, 1]
        assert first["info"] == {"debug": "Stream started"}
        # Two uncommitted: only keep-alives until the commit.
        for _ in range(3):
            assert "events" not in client.batch()
        assert commit(zookeeper, subscription, client, first)
        second = client.events_batch()
        assert [e["n"] for e in second["events"]] == [2, 3]
    finally:
        client.close()


def test_a_second_stream_takes_partitions_once_the_first_committed(
        zookeeper, engine, topic, timeline, subscription):
    first = open_stream(zookeeper, engine, subscription, timeline, batch_flush_timeout=1)
    state = SubscriptionState(zookeeper, subscription.id)
    second = None
    try:
        assert {p.session for p in state.topology().partitions} == {first.stream.id}
        append(engine, topic, 1, 1)
        delivered = first.events_batch()
        second = open_stream(zookeeper, engine, subscription, timeline, batch_flush_timeout=1)
        topology = state.topology()
        assert len(topology.heading_to(second.stream.id)) == 1
        # The first stream holds an uncommitted event; after the commit the moves finish.
        commit(zookeeper, subscription, first, delivered)
        wait_until(lambda: sorted(len(state.topology().held_by(c.stream.id))
                                  for c in (first, second)) == [1, 2]
                   and all(p.state == "assigned" for p in state.topology().partitions))
    finally:
        close_all(first, second)


def test_partitions_moved_before_the_first_turn_are_handed_over_at_once(
        zookeeper, engine, topic, timeline, subscription):
    """The second stream starts between the first one's start and its first turn: the
    first has sent nothing of the partition it gives up, so it moves at once."""
    first_stream = started_stream(zookeeper, engine, subscription, timeline)
    first = second = None
    try:
        second = open_stream(zookeeper, engine, subscription, timeline)
        first = Client(first_stream)
        state = SubscriptionState(zookeeper, subscription.id)
        wait_until(lambda: sorted(len(state.topology().held_by(c.stream.id))
                                  for c in (first, second)) == [1, 2]
                   and all(p.state == "assigned" for p in state.topology().partitions))
    finally:
        if first is None:
            first_stream.end()
        close_all(first, second)


def test_a_stream_reads_the_sessions_once_to_start(
        zookeeper, engine, topic, timeline, subscription, monkeypatch):
    """Its start's rebalance arms the sessions watch: its first turn rebalances again
    only if a stream came or went since. A stream that asks for no partition directly
    has nothing to check against the other sessions before it registers."""
    reads = []
    sessions = SubscriptionState.sessions
    monkeypatch.setattr(SubscriptionState, "sessions",
                        lambda state, watch=None: reads.append(1) or sessions(state, watch))
    append(engine, topic, 0, 1)
    client = open_stream(zookeeper, engine, subscription, timeline)
    try:
        client.events_batch()
        assert len(reads) == 1
    finally:
        client.close()


def test_a_stream_whose_zookeeper_session_dies_leaves_its_partitions_to_the_others(
        zookeeper, other_client, engine, topic, timeline, subscription):
    """Nobody rebalances for a stream of an instance that lost ZooKeeper: its session
    node vanishes, and the watch of the others' sessions moves its partitions."""
    first = open_stream(zookeeper, engine, subscription, timeline)
    state = SubscriptionState(zookeeper, subscription.id)
    try:
        second = started_stream(other_client, engine, subscription, timeline)
        wait_until(lambda: len(state.topology().held_by(second.id)) == 1
                   and all(p.state == "assigned" for p in state.topology().partitions))
        other_client.stop()
        wait_until(lambda: len(state.topology().held_by(first.stream.id)) == 3
                   and all(p.state == "assigned" for p in state.topology().partitions))
    finally:
        first.close()


def test_more_streams_than_partitions_are_refused_without_leaving_a_session(
        zookeeper, engine, topic, timeline, subscription):
    clients = [open_stream(zookeeper, engine, subscription, timeline) for _ in range(3)]
    state = SubscriptionState(zookeeper, subscription.id)
    try:
        with pytest.raises(StreamRefused) as refused:
            open_stream(zookeeper, engine, subscription, timeline)
        assert refused.value.status == 409
        assert len(state.sessions()) == 3
    finally:
        close_all(*clients)


def test_deleting_the_subscription_ends_its_stream(zookeeper, engine, topic, timeline,
                                                   subscription):
    client = open_stream(zookeeper, engine, subscription, timeline)
    remove_subscription_state(zookeeper, subscription.id)
    while client.batch() is not None:
        pass
    wait_until(lambda: client.stream.phase == Phase.ENDED)


def test_a_stream_that_stops_reading_ends_and_frees_its_session(
        zookeeper, engine, topic, timeline, subscription):
    client = open_stream(zookeeper, engine, subscription, timeline)
    state = SubscriptionState(zookeeper, subscription.id)
    gevent.idle()  # the stream runs until it waits for events
    client.close()  # the stream is stopped, as gunicorn does when the client left
    wait_until(lambda: not state.sessions())
    assert all(p.state == "unassigned" for p in state.topology().partitions)


def test_a_stream_reads_no_further_than_its_stream_limit(
        zookeeper, engine, topic, timeline, subscription, monkeypatch):
    """The read-ahead that keeps a paused stream fed stops at ``stream_limit``: events
    past it are never sent, and a reader waiting for them would hold the end of the
    stream (and the client's connection) for a poll."""
    append(engine, topic, 0, 50)
    read: list[int] = []

    def count_reads(reader):
        poll = reader.poll

        def counted(max_events, timeout):
            events = poll(max_events, timeout)
            read.extend(event.offset for event in stored_events(events))
            return events
        reader.poll = counted

    on_every_reader(monkeypatch, engine, count_reads)
    client = open_stream(zookeeper, engine, subscription, timeline, batch_limit=5,
                         stream_limit=10, max_uncommitted_events=100)
    batches = []
    while (batch := client.batch()) is not None:
        batches.append(batch)
    assert [len(b.get("events", ())) for b in batches] == [5, 5]
    assert len(read) == 10


def test_a_stream_sends_what_was_read_before_its_reader_reads_on(
        zookeeper, engine, topic, timeline, subscription, monkeypatch):
    """A reader that finds its events already fetched (a kafka consumer's local queue)
    never waits, so it must make way after each poll: else it reads as far as the
    stream may go before a first batch goes out, and the stream reads and sends in
    turns instead of at once."""
    count = 3 * MAX_POLL_EVENTS
    append(engine, topic, 0, count)
    read = events_per_poll(monkeypatch, engine)
    client = open_stream(zookeeper, engine, subscription, timeline, batch_limit=100,
                         stream_limit=count, max_uncommitted_events=count)
    try:
        client.events_batch()
        assert sum(read) < MAX_INBOX_EVENTS  # one poll, not as far as the inbox may hold
    finally:
        client.close()


def test_a_stream_s_first_events_wait_for_a_small_read(
        zookeeper, engine, topic, timeline, subscription, monkeypatch):
    """Over a backlog the first batch waits for the readers' first poll: it asks for
    ``FIRST_POLL_EVENTS`` at most, and only the polls after it for up to
    ``MAX_POLL_EVENTS``."""
    count = 3 * MAX_POLL_EVENTS
    append(engine, topic, 0, count)
    asked: list[int] = []

    def record_asked(reader):
        poll = reader.poll
        reader.poll = lambda max_events, timeout: asked.append(max_events) or poll(
            max_events, timeout)
    on_every_reader(monkeypatch, engine, record_asked)
    client = open_stream(zookeeper, engine, subscription, timeline, batch_limit=100,
                         stream_limit=count, max_uncommitted_events=count)
    try:
        client.events_batch()
        wait_until(lambda: len(asked) >= 2)
        assert asked[0] <= FIRST_POLL_EVENTS < max(asked)
    finally:
        client.close()


def test_a_stream_paused_at_its_window_takes_no_turn_for_the_read_ahead(
        zookeeper, engine, topic, timeline, subscription, monkeypatch):
    """The readers read ahead while the stream waits for a commit; each of their polls
    must not wake it for a turn that can take nothing, and the commit still does."""
    append(engine, topic, 0, 5_000)

    def small_polls(reader):
        poll = reader.poll
        reader.poll = lambda max_events, timeout: poll(min(max_events, 100), timeout)
    on_every_reader(monkeypatch, engine, small_polls)
    read = events_per_poll(monkeypatch, engine)
    stream = started_stream(zookeeper, engine, subscription, timeline, batch_limit=100,
                            batch_flush_timeout=30, max_uncommitted_events=1_000)
    turns = []
    take = stream._take_read_events
    monkeypatch.setattr(stream, "_take_read_events", lambda: turns.append(1) or take())
    client = Client(stream)
    try:
        sent = [client.events_batch() for _ in range(10)]  # the window
        polls, turns[:] = len(read), []
        wait_until(lambda: sum(read) >= 2_000, timeout=5)  # and the read-ahead, in 10 polls
        gevent.sleep(0.5)
        assert len(read) - polls >= 5
        assert len(turns) <= 2, f"{len(turns)} turns for {len(read) - polls} polls"
        assert commit(zookeeper, subscription, client, sent[0])
        assert [e["n"] for e in client.events_batch()["events"]] == list(range(1_000, 1_100))
    finally:
        client.close()


def test_a_stream_ends_with_its_last_keep_alive(
        zookeeper, engine, topic, timeline, subscription):
    """The end follows the keep-alive that reached ``stream_keep_alive_limit`` at once,
    not a flush timeout (or a reader's poll) later: clients wait for the close."""
    client = open_stream(zookeeper, engine, subscription, timeline, batch_flush_timeout=1,
                         stream_keep_alive_limit=2)
    keep_alives = []
    while (batch := client.batch()) is not None:
        assert "events" not in batch
        keep_alives.append(time.monotonic())
    ended = time.monotonic()
    assert len(keep_alives) == 2 * timeline.partitions
    assert ended - keep_alives[-1] < 0.5


def test_the_readers_of_an_ended_stream_close_by_themselves(
        zookeeper, engine, topic, timeline, subscription, monkeypatch):
    """Ending does not wait for the readers (one may be waiting for appends), but they
    stop within their poll and close: nothing reads the topic for a stream that is over."""
    opened, closed = [], []

    def track_close(reader):
        opened.append(reader)
        close = reader.close

        def tracked_close():
            closed.append(reader)
            close()
        reader.close = tracked_close

    on_every_reader(monkeypatch, engine, track_close)
    client = open_stream(zookeeper, engine, subscription, timeline, batch_flush_timeout=1,
                         stream_keep_alive_limit=1)
    while client.batch() is not None:
        pass
    wait_until(lambda: client.stream.phase == Phase.ENDED)
    assert opened
    wait_until(lambda: len(closed) == len(opened), timeout=5)


def test_a_huge_window_does_not_read_the_partitions_into_memory(
        zookeeper, engine, topic, timeline, subscription, monkeypatch):
    """A client asking for any ``max_uncommitted_events`` that stops reading (the
    stream waits in its write) leaves at most ``MAX_INBOX_EVENTS`` read ahead."""
    count = 60_000
    append(engine, topic, 0, count)
    read = events_per_poll(monkeypatch, engine)
    stream = started_stream(zookeeper, engine, subscription, timeline, batch_limit=100,
                            max_uncommitted_events=10_000_000)
    lines = stream.lines()
    try:
        next(lines)  # the first chunk is written; the client reads no further
        gevent.sleep(2)
        assert sum(read) < MAX_INBOX_EVENTS + MAX_POLL_EVENTS + 1000 < count
    finally:
        lines.close()
        stream.end()


def test_a_huge_batch_limit_sends_what_passes_the_memory_bound(
        zookeeper, engine, topic, timeline, subscription, monkeypatch):
    """A batch of millions would be held in the worker's memory until the flush
    timeout: past ``MAX_BUFFERED_BYTES`` the stream sends what it holds."""
    monkeypatch.setattr("app.streaming.batcher.MAX_BUFFERED_BYTES", 5000)
    append(engine, topic, 0, 1000)  # ~9,000 bytes
    client = open_stream(zookeeper, engine, subscription, timeline, batch_limit=1_000_000,
                         batch_flush_timeout=30, max_uncommitted_events=1_000_000)
    try:
        started = time.monotonic()
        batch = client.events_batch()
        assert time.monotonic() - started < 5
        assert 0 < len(batch["events"]) <= 1000
    finally:
        client.close()
