"""Reading one offset range, against a fake broker whose partition has gaps (the
offsets of events that compaction removed)."""

from __future__ import annotations

from workers.pipeline.client import StreamBatch
from workers.pipeline.ranges import OffsetRange, read_range


def offset(n: int) -> str:
    return f"001-0001-{n:018d}" if n >= 0 else "001-0001--1"


class CompactedPartition:
    """A partition whose events that stay sit at ``offsets``; its streams send lines
    of up to ``batch_limit`` events whose cursor is the line's last event, as the
    broker's low-level streams do. Every stream asked is recorded."""

    def __init__(self, offsets: list[int]) -> None:
        self.offsets = offsets
        self.streams: list[tuple[str, int, int]] = []

    def stream(self, name, partition, after, count, batch_limit=1000, exact=False,
               decode=None):
        self.streams.append((after, count, batch_limit))
        start = -1 if after.endswith("--1") else int(after.rsplit("-", 1)[1])
        following = [n for n in self.offsets if n > start][:count]
        for i in range(0, len(following), batch_limit):
            line = following[i:i + batch_limit]
            yield StreamBatch(partition, offset(line[-1]), [{"n": n} for n in line])

    def shifted(self, name, shifts):  # offsets of removed events: must not be used
        raise AssertionError("shifted-cursors asked")


def read(client: CompactedPartition, span: OffsetRange) -> list[tuple[str, int]]:
    return [(o, event["n"]) for offsets, events in read_range(client, "t", span, 5000)
            for o, event in zip(offsets.to_pylist(), events, strict=True)]


def test_a_compacted_range_gives_each_event_that_stays_once_with_its_own_offset():
    client = CompactedPartition([15, 16, 17, 18, 19])
    # 20 offsets from -1 to 19, 15 of them removed: lines of several events would have
    # cursors 17 and 19 and no way to tell their events' offsets.
    span = OffsetRange("0", offset(-1), offset(19), 20, compacted=True)
    assert read(client, span) == [(offset(n), n) for n in range(15, 20)]
    assert client.streams == [(offset(-1), 20, 1)]  # one stream, one event a line


def test_a_compacted_range_ends_at_its_end_offset_even_when_that_event_is_gone():
    client = CompactedPartition([3, 7, 8, 12])
    assert read(client, OffsetRange("0", offset(-1), offset(5), 6, compacted=True)) == [
        (offset(3), 3)]
    assert read(client, OffsetRange("0", offset(5), offset(10), 5, compacted=True)) == [
        (offset(7), 7), (offset(8), 8)]
    assert read(client, OffsetRange("0", offset(8), offset(11), 3, compacted=True)) == []
    assert len(client.streams) == 3


def test_a_range_without_gaps_is_read_in_lines_of_the_batch_limit():
    client = CompactedPartition(list(range(10)))
    assert read(client, OffsetRange("0", offset(2), offset(9), 7)) == [
        (offset(n), n) for n in range(3, 10)]
    assert client.streams == [(offset(2), 7, 5000)]
