"""A kafka reader turns consumed messages into runs: each record once, in order, none
at or before the position asked, and errors other than a partition's end raised."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from confluent_kafka import KafkaError

from app.storage.engine import StorageError, TopicNotFound, stored_events
from app.storage.kafka.reader import take_runs


@dataclass
class Consumed:
    """Stands in for confluent_kafka's Message, which Python code cannot build."""

    _partition: int
    _offset: int
    _value: bytes | None = b"x"
    _error: KafkaError | None = None

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes | None:
        return self._value

    def error(self) -> KafkaError | None:
        return self._error


def record(partition: int, offset: int) -> Consumed:
    return Consumed(partition, offset, f"{partition}:{offset}".encode())


def end_of(partition: int, offset: int) -> Consumed:
    return Consumed(partition, offset, None, KafkaError(KafkaError._PARTITION_EOF))


def test_consecutive_records_of_a_partition_make_one_run_and_move_its_position():
    following = {0: 5, 1: 0}
    messages = [record(0, 5), record(0, 6), record(1, 0), end_of(1, 1), record(0, 7)]
    runs = take_runs(messages, following, "t", "Kafka")
    assert [(run.partition, run.first, len(run.payloads)) for run in runs] == [
        (0, 5, 2), (1, 0, 1), (0, 7, 1)]
    assert [(e.partition, e.offset, e.payload) for e in stored_events(runs)] == [
        (0, 5, b"0:5"), (0, 6, b"0:6"), (1, 0, b"1:0"), (0, 7, b"0:7")]
    assert following == {0: 8, 1: 1}


def test_a_gap_in_offsets_starts_a_new_run():
    runs = take_runs([record(2, 0), record(2, 1), record(2, 4)], {2: 0}, "t", "Kafka")
    assert [(run.first, run.last) for run in runs] == [(0, 1), (4, 4)]


def test_records_at_or_before_the_position_are_skipped():
    following = {0: 3, 1: 2}
    messages = [record(0, 1), record(0, 2), record(0, 3), record(1, 0), record(1, 2),
                record(0, 3), record(0, 4)]
    runs = take_runs(messages, following, "t", "Kafka")
    assert [(e.partition, e.offset) for e in stored_events(runs)] == [(0, 3), (1, 2), (0, 4)]
    assert following == {0: 5, 1: 3}


def test_a_record_without_a_value_is_an_empty_payload():
    assert stored_events(take_runs([Consumed(0, 0, None)], {0: 0}, "t", "Kafka"))[0].payload == b""


def test_only_nothing_at_all_gives_no_runs():
    following = {0: 0}
    assert take_runs([end_of(0, 0)], following, "t", "Kafka") == []
    assert following == {0: 0}


@pytest.mark.parametrize(("code", "raised"), [
    (KafkaError.UNKNOWN_TOPIC_OR_PART, TopicNotFound),
    (KafkaError._TRANSPORT, StorageError),
])
def test_other_errors_raise(code, raised):
    with pytest.raises(raised):
        take_runs([record(0, 0), Consumed(0, 1, None, KafkaError(code))], {0: 0}, "t", "Kafka")
