"""Whether the Kafka brokers are reachable, so calls fail fast during an outage.

librdkafka reports "all brokers are down" through its error callback, then keeps
retrying quietly: a produce would wait for its acknowledgements until the
engine's timeout. Once that report came, ``raise_if_down`` refuses at once
(``StorageUnavailable``, a 503), except that at most once a second one caller
asks the broker for metadata; when it answers, the outage is over.
"""

from __future__ import annotations

from collections.abc import Callable
from time import monotonic

from confluent_kafka import KafkaError

from app.storage.engine import StorageUnavailable
from app.storage.kafka.clients import KAFKA
from app.storage.kafka.threads import BlockingCalls
from app.storage.kafka.topics import Topics

PROBE_INTERVAL_S = 1.0
PROBE_TIMEOUT_S = 1.0


class BrokerAvailability:
    """``on_down`` runs on the hub whenever librdkafka reports every broker down."""

    def __init__(self, topics: Topics, threads: BlockingCalls,
                 on_down: Callable[[], None] = lambda: None) -> None:
        self._topics = topics
        self._threads = threads
        self._on_down = on_down
        self._down: str | None = None
        self._next_probe = 0.0

    def client_error(self, error: KafkaError) -> None:
        """Fed with librdkafka's errors (from any thread)."""
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self._down = error.str()
            self._threads.call_on_hub(self._on_down)

    @property
    def down(self) -> bool:
        return self._down is not None

    def raise_if_down(self) -> None:
        """``StorageUnavailable`` while the brokers are known to be down."""
        reason = self._down
        if reason is None:
            return
        now = monotonic()
        if now >= self._next_probe:
            self._next_probe = now + PROBE_INTERVAL_S
            try:
                self._topics.check(PROBE_TIMEOUT_S)
            except StorageUnavailable as error:  # still down
                reason = error.reason
            except Exception as error:  # still down, whatever the way it fails
                reason = str(error)
            else:
                self._down = None
                return
        raise StorageUnavailable(KAFKA, reason)
