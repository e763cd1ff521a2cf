"""``SharedWatchedCalls``: the greenlets of a process making one ZooKeeper call at once,
each with a watch, share one call whose watch fires all of theirs.

Every stream of a subscription reads its sessions and rebalances whenever one comes
or goes, and reads its topology whenever it changes: N streams starting together
made O(N^2) reads of each (the sessions' read itself being one per session) and as
many versioned writes of the topology, most of them refused. Shared, as
``SharedCalls`` shares calls (a caller joins the call that starts next, never one
under way, so no answer predates its question), it is one or two calls per worker
and change.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from kazoo.protocol.states import WatchedEvent

from app.shared_calls import SharedCalls

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

WatchFunction = Callable[[WatchedEvent], None]


class SharedWatchedCalls(Generic[K, T]):
    """Calls by key (a client, a path, what else they depend on), shared by the
    callers that asked before each started."""

    def __init__(self) -> None:
        self._calls: SharedCalls[K, T] = SharedCalls()
        self._watches: dict[K, list[WatchFunction]] = {}  # of the callers of the next call

    def call(self, key: K, watch: WatchFunction | None,
             func: Callable[[WatchFunction | None], T]) -> T:
        """``func(watch)`` shared with the callers for ``key`` at once (their ``func``
        must do the same): the watch given to it fires every caller's ``watch``."""
        if watch is not None:
            self._watches.setdefault(key, []).append(watch)
        return self._calls.call(key, lambda: func(self._fan_out(key)))

    def _fan_out(self, key: K) -> WatchFunction | None:
        """One watch for the callers of the call starting now."""
        watches = self._watches.pop(key, [])
        if not watches:
            return None

        def fire_all(event: WatchedEvent) -> None:
            for watch in watches:
                watch(event)
        return fire_all
