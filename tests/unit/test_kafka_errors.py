"""How librdkafka's errors reach clients: a broker that does not answer is an outage
(a 503 naming the storage), whether or not librdkafka has reported its brokers down yet."""

from __future__ import annotations

import gevent
import pytest
from confluent_kafka import KafkaError, KafkaException

from app.dependencies import unavailable_from
from app.storage.engine import StorageUnavailable, TopicNotFound
from app.storage.kafka.clients import Clients, outage_name, storage_error
from app.storage.kafka.producer import _Delivery
from deploy.localstack import free_port


@pytest.mark.parametrize("code", [KafkaError._TIMED_OUT, KafkaError._TRANSPORT,
                                  KafkaError._ALL_BROKERS_DOWN, KafkaError.REQUEST_TIMED_OUT])
def test_an_unanswered_call_is_an_outage_naming_the_storage(code):
    error = storage_error(KafkaException(KafkaError(code)), "orders", outage_name("kafka-2"))
    assert isinstance(error, StorageUnavailable)
    outage = unavailable_from(error)
    assert outage is not None and "orders" in str(outage)
    assert str(outage).startswith("Kafka (the kafka-2 storage) is unavailable: ")


def test_a_missing_topic_is_not_an_outage():
    error = storage_error(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)), "orders",
                          "Kafka")
    assert isinstance(error, TopicNotFound)
    assert unavailable_from(error) is None


def test_a_refusal_is_not_an_outage():
    error = storage_error(KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)), "orders",
                          "Kafka")
    assert not isinstance(error, StorageUnavailable)
    assert unavailable_from(error) is None


def test_librdkafka_reports_errors_to_the_callback_and_writes_nothing_to_stderr(capfd):
    """Its own log lines are not JSON; the broker's log is, errors included."""
    errors: list[KafkaError] = []
    producer = Clients(f"127.0.0.1:{free_port()}", {}, errors.append).producer(1)
    producer.produce("orders", b"{}")
    producer.poll(1.5)
    producer.purge()
    producer.flush(1)
    assert any(error.code() == KafkaError._TRANSPORT for error in errors)
    assert capfd.readouterr().err == ""


class _Acknowledged:
    """A delivered message as the delivery report gives it."""

    def __init__(self, offset: int | None) -> None:
        self._offset = offset

    def offset(self) -> int | None:
        return self._offset


def test_an_acknowledgement_without_an_offset_fails_the_append():
    """What a broker answers for an event it takes for a duplicate; a restarted Tansu
    does so for a producer id it handed out twice, having stored nothing. The report
    used to assert, which stopped the poll thread: every append then waited out its
    timeout."""
    delivery = _Delivery(3, gevent.get_hub().loop)
    for offset in (7, None, 9):
        delivery.report(None, _Acknowledged(offset))  # type: ignore[arg-type]
    assert delivery.done.wait(1)
    assert delivery.offsets == [7, 9]
    assert delivery.error is not None
    error = storage_error(delivery.error, "orders/0", "Kafka")
    assert not isinstance(error, StorageUnavailable)
    assert "without an offset" in str(error)
