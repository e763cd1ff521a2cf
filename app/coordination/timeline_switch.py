"""Stopping every publisher of an event type, on every worker process of every
instance, while its timeline switches (the seed's protocol, manual 000).

ZooKeeper, under the root:

- ``timelines/locked_et/<event type>``: ephemeral, held by the switcher's
  session while the event type switches (so a switcher that dies unlocks it);
- ``timelines/version``: a counter the switcher bumps after locking and after
  unlocking;
- ``timelines/nodes/<id>``: ephemeral, one per worker process: the version it
  has acted on. A process acts on a version by blocking publishers of every
  locked event type and waiting for its publishes to them in flight, or by
  releasing those no longer locked.

The switcher locks, bumps the version and waits until every node shows it: from
then on nothing is appended to the old timeline by the processes it waited for.
It switches, unlocks, bumps again. Each process keeps the locked event types in
memory from its watches, so a publish pays one set lookup when no switch is in
progress.

A process is not waited for while it has no node: before it first reached
ZooKeeper, and from a lost connection (its session may expire, and the node with
it) until it has acted on the newest version again. A publish that overlapped
such a time says so (``publishing`` yields ``missed_switch``), and checks its
appends against the recorded end of their timeline
(``app.publishing.late_appends``). Readers ask the same of their reads of an
active timeline (``reading``), and of any switch that began meanwhile: such a read
may hold events past an end recorded while it ran, which the cached timelines do
not show yet, and leaves them out (``app.storage.across_timelines``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from time import monotonic

import gevent
import gevent.event
import gevent.lock
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from app.coordination.zookeeper import ZooKeeperUnavailable

LOCKED = "/timelines/locked_et"
VERSION = "/timelines/version"
NODES = "/timelines/nodes"
ACK_POLL_S = 0.02
RETRY_S = 1.0

log = logging.getLogger(__name__)


class SwitchInProgress(Exception):
    """A publish waited for a timeline switch longer than it may (answer 503)."""


class SwitchRefused(Exception):
    """Another switch of the event type runs (answer 409)."""


class SwitchTimedOut(Exception):
    """Not every process stopped publishing in time; nothing was switched (answer 503)."""


def _ensure_structure(client: KazooClient) -> None:
    client.ensure_path(LOCKED)
    client.ensure_path(NODES)
    with suppress(NodeExistsError):
        client.create(VERSION, b"0")


class PublishingGate:
    """One per worker process: holds publishes to locked event types back and
    counts those in flight."""

    def __init__(self, zookeeper: Callable[[], KazooClient], wait_s: float,
                 forget: Callable[[str], None], forget_all: Callable[[], None]) -> None:
        self._zookeeper = zookeeper
        self._wait_s = wait_s
        self._forget = forget  # drops an event type from the caches: its timeline changed
        self._forget_all = forget_all  # drops every event type: switches may have gone unseen
        self._node = f"{NODES}/{uuid.uuid4()}"
        self._locked: dict[str, gevent.event.Event] = {}  # set once unlocked
        self._in_flight: dict[str, int] = {}
        self._drained = gevent.event.Event()
        self._sync_lock = gevent.lock.Semaphore()
        self._watching = False
        self._in_step = False  # the node shows the newest version, with no lapse since
        self._lapses = 0  # times the connection was lost (the node may have gone)
        self._locks_seen = 0  # switches this process has seen begin

    @contextmanager
    def publishing(self, name: str) -> Iterator[Callable[[], bool]]:
        """Count a publish to ``name`` as in flight, after waiting while it is locked
        (``SwitchInProgress`` past ``wait_s``). Yields ``missed_switch``: whether a
        switch may have gone on without waiting for this publish, as this process was
        out of step with the switches at some moment since it began."""
        unlocked = self._locked.get(name)
        if unlocked is not None:
            deadline = monotonic() + self._wait_s
            while unlocked is not None:
                if not unlocked.wait(max(0.0, deadline - monotonic())):
                    raise SwitchInProgress(
                        f"the timeline of '{name}' is being switched and publishing to it "
                        f"did not resume within {self._wait_s:g} s; try again")
                unlocked = self._locked.get(name)
        lapses = self._lapses if self._in_step else -1
        in_flight = self._in_flight
        in_flight[name] = in_flight.get(name, 0) + 1
        try:
            yield lambda: self._lapses != lapses
        finally:
            left = in_flight[name] - 1
            if left:
                in_flight[name] = left
            else:
                del in_flight[name]
                if name in self._locked:
                    self._drained.set()  # a switch waits for it

    def reading(self, name: str) -> Callable[[], bool]:
        """Called as a read of ``name``'s active timeline begins, before the reader takes up
        the cached timelines: a callable that says, once the read is done, whether it may
        have read events past an end that a switch recorded meanwhile, which those
        timelines need not show. So it may while this process is out of step, and when a
        switch began or was under way; otherwise a switch that ended before the read
        dropped the cached timelines first (``_sync``)."""
        if name in self._locked:
            return lambda: True
        lapses = self._lapses if self._in_step else -1
        locks = self._locks_seen
        return lambda: self._lapses != lapses or self._locks_seen != locks

    def start(self) -> gevent.Greenlet:
        """Register this process and follow the switches, retrying until ZooKeeper answers."""
        return gevent.spawn(self._watch)

    def _watch(self) -> None:
        while not self._watching:
            try:
                client = self._zookeeper()
                _ensure_structure(client)
                client.add_listener(self._connection_changed)
                ChildrenWatch(client, LOCKED, self._changed)
                DataWatch(client, VERSION, self._changed)
                self._watching = True
            except (ZooKeeperUnavailable, KazooException) as error:
                log.warning("cannot follow timeline switches yet, retrying: %r", error)
                gevent.sleep(RETRY_S)

    def _connection_changed(self, state: str) -> None:
        if state == KazooState.CONNECTED:  # the node may have gone with a lost session
            gevent.spawn(self._sync)
        else:
            self._in_step = False
            self._lapses += 1

    def _changed(self, *_: object) -> None:
        gevent.spawn(self._sync)  # not in kazoo's callback greenlet: _sync waits

    def _sync(self) -> None:
        with self._sync_lock:
            lapses = self._lapses
            try:
                client = self._zookeeper()
                version = client.get(VERSION)[0]
                locked = set(client.get_children(LOCKED))
                for name in set(self._locked) - locked:
                    self._forget(name)  # before releasing: they read the new timeline
                    self._locked.pop(name).set()
                for name in locked - set(self._locked):
                    self._locked[name] = gevent.event.Event()
                    self._locks_seen += 1
                if not self._wait_drained(locked):
                    return  # the switcher times out; the next change syncs again
                try:
                    client.set(self._node, version)
                except NoNodeError:
                    client.create(self._node, version, ephemeral=True)
                if self._lapses == lapses and not self._in_step:
                    # Switches that went on without this process ended before it read the
                    # locks: their NOTIFY may not have dropped the cached timelines yet.
                    self._forget_all()
                    self._in_step = True
            except (ZooKeeperUnavailable, KazooException) as error:
                log.warning("following timeline switches failed: %r", error)

    def _wait_drained(self, names: set[str]) -> bool:
        deadline = monotonic() + self._wait_s
        while any(name in self._in_flight for name in names):
            self._drained.clear()
            if not self._drained.wait(max(0.0, deadline - monotonic())):
                log.warning("publishes to %s did not finish in %g s", sorted(names), self._wait_s)
                return False
        return True


def _bump(client: KazooClient) -> int:
    while True:
        data, stat = client.get(VERSION)
        version = int(data or b"0") + 1
        try:
            client.set(VERSION, str(version).encode(), version=stat.version)
            return version
        except BadVersionError:
            continue


def _all_acknowledged(client: KazooClient, version: int, timeout_s: float) -> bool:
    deadline = monotonic() + timeout_s
    while True:
        pending = 0
        for child in client.get_children(NODES):
            try:
                if int(client.get(f"{NODES}/{child}")[0] or b"0") < version:
                    pending += 1
            except NoNodeError:
                continue  # that process is gone
        if not pending:
            return True
        if monotonic() >= deadline:
            log.warning("%d processes did not act on timelines version %d", pending, version)
            return False
        gevent.sleep(ACK_POLL_S)


@contextmanager
def publishing_stopped(client: KazooClient, name: str, timeout_s: float) -> Iterator[None]:
    """Within the block no process publishes to ``name``; ``SwitchRefused`` when another
    switch of it runs, ``SwitchTimedOut`` when the processes did not stop in time."""
    _ensure_structure(client)
    path = f"{LOCKED}/{name}"
    try:
        client.create(path, ephemeral=True)
    except NodeExistsError:
        raise SwitchRefused(f"a timeline switch of '{name}' is already in progress") from None
    try:
        if not _all_acknowledged(client, _bump(client), timeout_s):
            raise SwitchTimedOut(f"not every broker process stopped publishing to '{name}' "
                                 f"within {timeout_s:g} s; nothing was switched, try again")
        yield
    finally:
        client.delete(path)
        _all_acknowledged(client, _bump(client), timeout_s)
