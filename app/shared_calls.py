"""``SharedCalls``: greenlets asking the same question at once share one answer.

A storm of streams opening at once (a worker restarted, a load balancer moved
clients) asks the brokers the same things thousands of times: the ends of a
topic's partitions (a consumer and a fetch on Tansu) and fresh metadata of every
topic. While ZooKeeper is away, every publish and every stream's read asks
PostgreSQL for the recorded end of its timeline (``Services.recorded_end``).
Callers here share calls, but never one that started before they asked:
a caller joins the call that starts next, once the one in flight (if any) has
ended. So an answer never predates its question (bounds include every event
acknowledged before they were asked for), and a burst costs two calls per key
however many callers it has. Except in an outage: when the call in flight ends
with ``DependencyUnavailable``, the callers waiting for the next one take that
answer (it came after they asked) rather than wait out a second timeout for
their 503 (GET /partitions took 10 s with a 5 s Kafka timeout).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar, cast

import gevent
import gevent.event

from app.dependencies import DependencyUnavailable

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class SharedCalls(Generic[K, T]):
    """Calls by key, each shared by the callers that arrived before it started."""

    def __init__(self) -> None:
        self._next: dict[K, gevent.event.AsyncResult[T]] = {}  # callers of a call to come
        self._latest: dict[K, gevent.event.AsyncResult[T]] = {}  # of the call started last

    def call(self, key: K, func: Callable[[], T]) -> T:
        """``func()``, or the result of the call for ``key`` that starts next (a
        caller's ``func`` for the same key must ask the same)."""
        shared = self._next.get(key)
        if shared is None:
            shared = self._next[key] = gevent.event.AsyncResult()
            gevent.spawn(self._run, key, shared, func)
        return cast(T, shared.get())

    def _run(self, key: K, shared: gevent.event.AsyncResult[T], func: Callable[[], T]) -> None:
        """In a greenlet of its own, so that a caller killed while waiting leaves
        the others their answer."""
        previous = self._latest.get(key)
        self._latest[key] = shared
        try:
            if previous is not None:
                previous.wait()  # every call's result is set, even a killed one's
            del self._next[key]  # who comes now waits for the next call
            if previous is not None and isinstance(previous.exception, DependencyUnavailable):
                raise previous.exception
            shared.set(func())
        except BaseException as error:
            if self._next.get(key) is shared:  # killed before its call started
                del self._next[key]
            shared.set_exception(error)
            if not isinstance(error, Exception):
                raise
        finally:
            if self._latest.get(key) is shared:
                del self._latest[key]
