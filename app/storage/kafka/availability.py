"""Whether the Kafka brokers are reachable, so calls fail fast during an outage.

librdkafka reports "all brokers are down" through its error callback, then keeps
retrying quietly: a produce would wait for its acknowledgements until the
engine's timeout. Once that report came, or a call waited its timeout out (a
broker that hangs keeps its connections, and librdkafka reports nothing: every
publish waited 10 s for as long as it hung), ``raise_if_down`` refuses at once
(``StorageUnavailable``, a 503) while a greenlet asks the broker for metadata, a
second at most for each attempt and one a second; when it answers, the outage is
over. (The caller itself asked once a second until 2026-11-29: one publishing
request after another each waited that second.) The greenlet starts with the
outage, so a worker nobody asked during it does not refuse its first request
after it.
"""

from __future__ import annotations

from collections.abc import Callable

import gevent
from confluent_kafka import KafkaError

from app.storage.engine import StorageUnavailable
from app.storage.kafka.threads import BlockingCalls
from app.storage.kafka.topics import Topics

PROBE_INTERVAL_S = 1.0
PROBE_TIMEOUT_S = 1.0


class BrokerAvailability:
    """``on_down`` runs on the hub whenever librdkafka reports every broker down;
    ``on_up`` when the brokers answer again after an outage."""

    def __init__(self, topics: Topics, threads: BlockingCalls,
                 on_down: Callable[[], None] = lambda: None,
                 on_up: Callable[[], None] = lambda: None) -> None:
        self._topics = topics
        self._threads = threads
        self._on_down = on_down
        self._on_up = on_up
        self._down: str | None = None
        self._prober: gevent.Greenlet | None = None

    def client_error(self, error: KafkaError) -> None:
        """Fed with librdkafka's errors (from any thread)."""
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self._down = error.str()
            self._threads.call_on_hub(self._reported_down)

    def unanswered(self, error: StorageUnavailable) -> None:
        """A call to the broker waited its timeout out: it hangs, or is gone."""
        if self._down is None:
            self._down = error.reason
        self._probe()

    @property
    def down(self) -> bool:
        return self._down is not None

    def raise_if_down(self) -> None:
        """``StorageUnavailable`` while the brokers are known to be down."""
        reason = self._down
        if reason is None:
            return
        self._probe()
        raise StorageUnavailable(self._threads.storage, reason)

    def close(self) -> None:
        """Stop asking (the engine closes)."""
        if self._prober is not None:
            self._prober.kill(block=False)

    def _reported_down(self) -> None:
        self._on_down()
        self._probe()

    def _probe(self) -> None:
        """Ask until the brokers answer, from now on: the outage ends (and ``on_up``
        runs) as soon as they are back, not at a request refused after that."""
        if self._down is not None and (self._prober is None or self._prober.dead):
            self._prober = gevent.spawn(self._probe_until_answered)

    def _probe_until_answered(self) -> None:
        while self._down is not None:
            try:
                self._topics.check(PROBE_TIMEOUT_S)
            except StorageUnavailable as error:  # still down
                self._down = error.reason
            except Exception as error:  # still down, whatever the way it fails
                self._down = str(error)
            else:
                self._down = None
                self._on_up()
                return
            gevent.sleep(PROBE_INTERVAL_S)
