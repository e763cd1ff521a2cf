"""How librdkafka's errors reach clients: a broker that does not answer is an outage
(a 503 naming Kafka), whether or not librdkafka has reported its brokers down yet."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from app.dependencies import unavailable_from
from app.storage.engine import StorageUnavailable, TopicNotFound
from app.storage.kafka.clients import Clients, storage_error
from deploy.localstack import free_port


@pytest.mark.parametrize("code", [KafkaError._TIMED_OUT, KafkaError._TRANSPORT,
                                  KafkaError._ALL_BROKERS_DOWN, KafkaError.REQUEST_TIMED_OUT])
def test_an_unanswered_call_is_an_outage_naming_kafka(code):
    error = storage_error(KafkaException(KafkaError(code)), "orders")
    assert isinstance(error, StorageUnavailable)
    outage = unavailable_from(error)
    assert outage is not None and "Kafka" in str(outage) and "orders" in str(outage)


def test_a_missing_topic_is_not_an_outage():
    error = storage_error(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)), "orders")
    assert isinstance(error, TopicNotFound)
    assert unavailable_from(error) is None


def test_a_refusal_is_not_an_outage():
    error = storage_error(KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)), "orders")
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
