"""The batching rules every stream shares, on a clock the test moves."""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from app.streaming.batcher import Batch, Batcher
from app.streaming.limits import StreamLimits
from tests.helpers.clock import Clock


def events(*names: str) -> list[bytes]:
    return [name.encode() for name in names]


def sent(batches: Iterable[Batch[Hashable]]) -> list[tuple[Hashable, list[bytes]]]:
    return [(partition, list(payloads)) for partition, payloads in batches]


def test_a_partition_flushes_when_it_holds_batch_limit_events():
    batcher = Batcher(StreamLimits(batch_limit=2), [0, 1], Clock())
    batcher.take(0, events("a", "b", "c"))
    batcher.take(1, events("x"))
    assert sent(batcher.full_batches()) == [(0, events("a", "b"))]
    assert batcher.buffered() == 2
    assert batcher.sent == 2


def test_a_partition_holding_several_batches_sends_them_all_in_order():
    clock = Clock()
    batcher = Batcher(StreamLimits(batch_limit=2, batch_flush_timeout=5), [0, 1], clock)
    batcher.take(0, events("a", "b", "c", "d", "e"))
    clock.now += 1
    assert sent(batcher.full_batches()) == [(0, events("a", "b")), (0, events("c", "d"))]
    assert (batcher.buffered(), batcher.sent) == (1, 4)
    assert batcher.next_due() == clock.now - 1 + 5  # partition 1 sent nothing: its timer runs
    assert sent(batcher.pending_batches()) == [(0, events("e"))]


def test_after_the_flush_timeout_a_partition_sends_what_it_has_or_a_keep_alive():
    clock = Clock()
    batcher = Batcher(StreamLimits(batch_limit=10, batch_flush_timeout=5), [0, 1], clock)
    batcher.take(0, events("a"))
    clock.now += 4.9
    assert sent(batcher.due_batches()) == []
    clock.now += 0.1
    assert sent(batcher.due_batches()) == [(0, events("a")), (1, [])]
    assert batcher.next_due() == clock.now + 5


def test_stream_limit_caps_what_is_sent_over_all_partitions():
    batcher = Batcher(StreamLimits(batch_limit=2, stream_limit=3), [0, 1], Clock())
    batcher.take(0, events("a", "b"))
    assert not batcher.stream_limit_reached()
    batcher.take(1, events("x", "y"))
    assert batcher.stream_limit_reached()
    assert sent(batcher.full_batches()) == [(0, events("a", "b")), (1, events("x"))]
    assert batcher.room() == 0
    assert sent(batcher.pending_batches()) == []


def test_the_keep_alive_limit_counts_keep_alives_in_a_row_on_every_partition():
    clock = Clock()
    batcher = Batcher(StreamLimits(batch_flush_timeout=1, stream_keep_alive_limit=2), [0, 1],
                      clock)
    clock.now += 1
    list(batcher.due_batches())
    batcher.take(1, events("x"))
    clock.now += 1
    list(batcher.due_batches())  # partition 1 sent an event: its count starts again
    assert not batcher.keep_alive_limit_reached()
    clock.now += 1
    list(batcher.due_batches())
    clock.now += 1
    list(batcher.due_batches())
    assert batcher.keep_alive_limit_reached()


def test_a_removed_partition_gives_back_what_it_held_and_no_longer_flushes():
    clock = Clock()
    batcher = Batcher(StreamLimits(batch_flush_timeout=1), [("a", 0), ("a", 1)], clock)
    batcher.take(("a", 0), events("e1", "e2"))
    assert list(batcher.remove(("a", 0))) == events("e1", "e2")
    batcher.add(("b", 0))
    clock.now += 1
    assert sent(batcher.due_batches()) == [(("a", 1), []), (("b", 0), [])]
    assert batcher.partitions == [("a", 1), ("b", 0)]


def test_the_buffered_count_follows_takes_flushes_removals_and_restarts():
    # Streams pause on it (max_uncommitted_events) and read ahead by it.
    clock = Clock()
    batcher = Batcher(StreamLimits(batch_limit=2, batch_flush_timeout=5), [0, 1], clock)
    batcher.take(0, events("a", "b", "c"))
    batcher.take(1, events("x", "y"))
    assert batcher.buffered() == 5
    list(batcher.full_batches())
    assert batcher.buffered() == 1  # "c" waits for its timeout
    batcher.take(1, events("z"))
    assert list(batcher.remove(1)) == events("z")
    assert batcher.buffered() == 1
    batcher.take(0, events("d"))
    batcher.add(0)  # taken up again from scratch: what it held is gone
    assert batcher.buffered() == 0
    batcher.take(0, events("e"))
    clock.now += 5
    assert sent(batcher.due_batches()) == [(0, events("e"))]
    assert batcher.buffered() == 0
    batcher.take(0, events("f"))
    assert sent(batcher.pending_batches()) == [(0, events("f"))]
    assert batcher.buffered() == 0


def test_buffers_past_the_memory_bound_are_sent_whatever_the_batch_limit(monkeypatch):
    monkeypatch.setattr("app.streaming.batcher.MAX_BUFFERED_BYTES", 1000)
    batcher = Batcher(StreamLimits(batch_limit=1_000_000), [0, 1], Clock())
    batcher.take(0, [b"a" * 100] * 6)
    batcher.take(1, [b"b" * 100] * 4)
    assert sent(batcher.full_batches()) == []  # 1,000 bytes: at the bound, not past it
    batcher.take(1, [b"c" * 100])
    assert sent(batcher.full_batches()) == [
        (0, [b"a" * 100] * 6), (1, [b"b" * 100] * 4 + [b"c" * 100])]
    assert (batcher.buffered(), batcher.sent) == (0, 11)
