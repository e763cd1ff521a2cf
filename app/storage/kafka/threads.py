"""Native threads for the librdkafka calls that wait, so they never block the hub.

The engine has its own pool rather than the hub's default one because readers
park a thread while they wait, and the hub's pool also resolves DNS. A call's
exception comes back as a value and is raised in the waiting greenlet, so the
hub does not print expected failures (a missing topic) as crashes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, ParamSpec, TypeAlias, TypeVar, TypeVarTuple, Unpack

import gevent.event
from confluent_kafka import KafkaException
from gevent.threadpool import ThreadPool

from app.storage.engine import StorageError
from app.storage.kafka.clients import storage_error

P = ParamSpec("P")
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
Ts = TypeVarTuple("Ts")

IDLE_THREAD_S = 60
"""How long an idle thread stays around for the next call."""


@dataclass(frozen=True, slots=True)
class Returned(Generic[T_co]):
    """A call in a pool thread returned ``value``."""

    value: T_co


@dataclass(frozen=True, slots=True)
class Raised:
    """A call in a pool thread raised ``error``."""

    error: Exception


Outcome: TypeAlias = "Returned[T] | Raised"


def _outcome(func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Outcome[T]:
    """Runs in a pool thread: ``func``'s result or exception, as a value."""
    try:
        return Returned(func(*args, **kwargs))
    except Exception as error:
        return Raised(error)


def unwrap(outcome: Outcome[T] | None) -> T:
    """The value a pool thread returned, or its exception raised here."""
    if isinstance(outcome, Raised):
        raise outcome.error
    assert outcome is not None, "a pool thread always leaves an outcome"
    return outcome.value


class BlockingCalls:
    """Runs blocking calls in native threads while greenlets wait cooperatively.

    The pool starts on first use (after gunicorn's fork). ``shut`` refuses new
    calls; ``join`` then waits for the running ones and stops the threads. A
    librdkafka error a call raises becomes a ``StorageError`` naming ``storage``."""

    def __init__(self, max_threads: int, storage: str) -> None:
        self._max_threads = max_threads
        self.storage = storage
        self._pool: ThreadPool | None = None
        self.shut_down = False

    def ensure_running(self) -> ThreadPool:
        """The pool, started if needed; ``StorageError`` once shut."""
        if self.shut_down:
            raise StorageError("the kafka engine is closed")
        if self._pool is None:
            self._pool = ThreadPool(self._max_threads, idle_task_timeout=IDLE_THREAD_S)
        return self._pool

    def spawn(
        self, func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> gevent.event.AsyncResult[Outcome[T]]:
        """Start ``func`` in a pool thread; ``unwrap`` what the result holds."""
        return self.ensure_running().spawn(_outcome, func, *args, **kwargs)

    def run(self, what: str, func: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``func`` in a pool thread while this greenlet waits; a librdkafka
        error becomes a ``StorageError`` about ``what``."""
        try:
            return unwrap(self.spawn(func, *args, **kwargs).get())
        except KafkaException as error:
            raise storage_error(error, what, self.storage) from error

    def call_on_hub(self, func: Callable[[Unpack[Ts]], object], *args: *Ts) -> None:
        """Have the hub call ``func(*args)`` soon; safe from any thread. Dropped
        while the pool has not started (no client runs yet)."""
        if self._pool is not None:
            self._pool.hub.loop.run_callback_threadsafe(func, *args)

    def shut(self) -> None:
        self.shut_down = True

    def join(self) -> None:
        self.shut()
        if self._pool is not None:
            self._pool.join()
            self._pool.kill()
