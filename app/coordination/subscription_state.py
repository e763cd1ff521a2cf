"""A subscription's coordination state in ZooKeeper, shared by every instance.

Under ``subscription_path(id)``:

- ``sessions/<stream id>``: ephemeral, one per open stream, JSON
  ``{"requested": [[event type, partition], ...], "closing": false}``; it goes
  when the stream ends or its ZooKeeper session dies.
- ``commits/<stream id>``: ephemeral, made and removed with the session node.
  Each commit for the stream sets it to what it committed, JSON
  ``[[event type, partition, offset], ...]``, so its version counts the
  commits: the stream watches this one node, not an offset per partition (a
  commit of eight partitions fired eight watches and eight reads). A commit
  in the process that runs the stream tells it directly and usually leaves the
  node as it is (``commit_if_unchanged``): the version counts the others.
- ``topology``: JSON ``{"partitions": [...]}``, which session streams which
  partition. Only ever changed by a versioned ``set`` of a value computed
  from the version read; a lost race reads again and recomputes.
- ``offsets/<event type>/<partition>``: the committed client offset string.
  All are created in one transaction with ``offsets`` itself, so the
  subscription's starting offsets are set exactly once; a commit is a
  versioned ``set`` that only moves forward.
- ``reset``: ephemeral while a cursor reset (PATCH) runs.

Deleting the subscription deletes the whole tree: watches fire, reads raise
``SubscriptionGone`` and streams end.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import orjson
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import WatchedEvent

from app.coordination.nodes import create_all, delete_all
from app.coordination.shared_watched_calls import SharedWatchedCalls
from app.coordination.subscription_nodes import subscription_path
from app.domain.topology import PartitionAssignment, PartitionKey, Session, Topology, key_order
from app.subscriptions.rebalance import rebalance

Watch = Callable[[WatchedEvent], None] | None

ANY_VERSION = -1
"""ZooKeeper's version that any version of an existing node matches."""

NodeKey = tuple[KazooClient, str]
"""A process's client and a node's path."""

_sessions_reads: SharedWatchedCalls[NodeKey, list[Session]] = SharedWatchedCalls()
_topology_reads: SharedWatchedCalls[NodeKey, Topology] = SharedWatchedCalls()
_rebalances: SharedWatchedCalls[tuple[KazooClient, str, frozenset[PartitionKey]], Topology] = \
    SharedWatchedCalls()


class SubscriptionGone(Exception):
    """The subscription's state was removed: the subscription was deleted."""


class ResetInProgress(Exception):
    """A cursor reset of the subscription is running."""


@dataclass(frozen=True)
class CommitCheck:
    """What ``commit_check`` read: whether the session is open, the topology and its
    version (None when it has no node yet), each offset and its version (None where
    none is stored)."""

    open_session: bool
    topology: Topology
    topology_version: int | None
    offsets: dict[PartitionKey, tuple[str, int] | None]


def _topology_json(topology: Topology) -> bytes:
    return orjson.dumps({"partitions": [
        {"event_type": p.event_type, "partition": p.partition, "state": p.state,
         "session": p.session, "next_session": p.next_session}
        for p in topology.partitions]})


def _topology_from(data: bytes) -> Topology:
    if not data:
        return Topology(())
    return Topology(tuple(
        PartitionAssignment(p["event_type"], p["partition"], p["state"], p["session"],
                            p["next_session"])
        for p in orjson.loads(data)["partitions"]))


def _session_from(session_id: str, data: bytes) -> Session:
    fields = orjson.loads(data) if data else {}
    return Session(session_id, frozenset((et, p) for et, p in fields.get("requested", ())),
                   bool(fields.get("closing", False)))


def _announcement_json(offsets: Mapping[PartitionKey, str]) -> bytes:
    return orjson.dumps([[event_type, partition, offset]
                         for (event_type, partition), offset in offsets.items()])


def _announcement_from(data: bytes) -> dict[PartitionKey, str]:
    return {(event_type, partition): offset
            for event_type, partition, offset in (orjson.loads(data) if data else ())}


def _session_json(session: Session) -> bytes:
    return orjson.dumps({"requested": sorted(session.requested, key=key_order),
                         "closing": session.closing})


class SubscriptionState:
    """Reads and versioned writes of one subscription's nodes."""

    def __init__(self, zookeeper: KazooClient, subscription_id: str) -> None:
        self.zookeeper = zookeeper
        self.subscription_id = subscription_id
        self.root = subscription_path(subscription_id)
        self.sessions_path = f"{self.root}/sessions"
        self.commits_path = f"{self.root}/commits"
        self.topology_path = f"{self.root}/topology"
        self.offsets_path = f"{self.root}/offsets"
        self.reset_path = f"{self.root}/reset"

    def offset_path(self, key: PartitionKey) -> str:
        return f"{self.offsets_path}/{key[0]}/{key[1]}"

    # Sessions

    def register(self, session: Session) -> None:
        """Add an open stream and the node its commits are announced on; creates the
        subscription's tree on its first stream."""
        create_all(self.zookeeper, [(f"{self.sessions_path}/{session.id}", _session_json(session)),
                                    (f"{self.commits_path}/{session.id}", b"")], ephemeral=True)

    def mark_closing(self, session: Session) -> None:
        closing = Session(session.id, session.requested, closing=True)
        with contextlib.suppress(NoNodeError):
            self.zookeeper.set(f"{self.sessions_path}/{session.id}", _session_json(closing))

    def unregister(self, session_id: str) -> None:
        delete_all(self.zookeeper, [f"{self.sessions_path}/{session_id}",
                                    f"{self.commits_path}/{session_id}"])

    def sessions(self, watch: Watch = None) -> list[Session]:
        """The open streams; ``watch`` fires once when one comes or goes. The streams
        of a worker asking at once share a read (``SharedWatchedCalls``): 96 streams
        of one subscription starting together sent ZooKeeper ~500 reads each."""
        return list(_sessions_reads.call((self.zookeeper, self.sessions_path), watch,
                                         self._read_sessions))

    def _read_sessions(self, watch: Watch) -> list[Session]:
        try:
            names = self.zookeeper.get_children(self.sessions_path, watch=watch)
        except NoNodeError:
            if self.zookeeper.exists(self.root) is None:
                raise SubscriptionGone(self.root) from None
            return []
        # Every session read at once: one round trip however many streams there are.
        asked = [(name, self.zookeeper.get_async(f"{self.sessions_path}/{name}"))
                 for name in names]
        found = []
        for name, answer in asked:
            with contextlib.suppress(NoNodeError):  # it ended meanwhile
                data, _ = answer.get()
                found.append(_session_from(name, data))
        return found

    def control(self, session_id: str, watch: Watch = None) -> tuple[bool, bool]:
        """Whether the session is open and whether a cursor reset runs, read in one
        round trip; ``watch`` fires once when either changes."""
        session_open, resetting = self._exist(f"{self.sessions_path}/{session_id}",
                                              self.reset_path, watch=watch)
        return session_open, resetting

    def _exist(self, *paths: str, watch: Watch = None) -> list[bool]:
        """Whether each node exists, asked at once (one round trip)."""
        asked = [self.zookeeper.exists_async(path, watch=watch) for path in paths]
        return [answer.get() is not None for answer in asked]

    # Topology

    def topology(self, watch: Watch = None) -> Topology:
        """The current topology; ``watch`` fires once when it changes or is deleted.
        The streams of a worker asking at once share a read, as for ``sessions``."""
        return _topology_reads.call((self.zookeeper, self.topology_path), watch,
                                    self._read_topology)

    def _read_topology(self, watch: Watch) -> Topology:
        try:
            data, _ = self.zookeeper.get(self.topology_path, watch=watch)
        except NoNodeError:
            if self.zookeeper.exists(self.root, watch=watch) is None:
                raise SubscriptionGone(self.root) from None
            # Not written yet: watch for its creation.
            self.zookeeper.exists(self.topology_path, watch=watch)
            return Topology(())
        return _topology_from(data)

    def update_topology(self, change: Callable[[Topology], Topology]) -> Topology:
        """Apply ``change`` to the topology as read, writing only if nobody wrote in
        between (else read again and retry). Returns the topology written."""
        while True:
            try:
                data, stat = self.zookeeper.get(self.topology_path)
            except NoNodeError:
                if self.zookeeper.exists(self.root) is None:
                    raise SubscriptionGone(self.root) from None
                data, stat = b"", None
            current = _topology_from(data)
            changed = change(current)
            if changed == current and stat is not None:
                return current
            try:
                if stat is None:
                    self.zookeeper.create(self.topology_path, _topology_json(changed))
                else:
                    self.zookeeper.set(self.topology_path, _topology_json(changed),
                                       version=stat.version)
                return changed
            except (BadVersionError, NodeExistsError):
                continue
            except NoNodeError:
                raise SubscriptionGone(self.root) from None

    def rebalance(self, partitions: Iterable[PartitionKey], sessions_watch: Watch = None
                  ) -> Topology:
        """Recompute the topology for the sessions open now; ``sessions_watch`` fires once
        when one comes or goes after they were read (one read arms it and serves the
        rebalance). The streams of a worker rebalancing at once share one rebalance:
        when each made its own, 96 streams starting together read the topology ~900
        times and wrote it ~500 times, most writes refused because another stream had
        just written the same topology."""
        keys = frozenset(partitions)

        def rebalance_once(watch: Watch) -> Topology:
            return self.update_topology(
                lambda current: rebalance(current, keys, self.sessions(watch)))
        return _rebalances.call((self.zookeeper, self.root, keys), sessions_watch,
                                rebalance_once)

    # Offsets

    def initialize_offsets(self, offsets: Mapping[PartitionKey, str]) -> bool:
        """Store the starting offsets unless some were stored already; True if these were.
        One transaction: instances racing on a subscription's first streams agree."""
        self.zookeeper.ensure_path(self.root)
        transaction = self.zookeeper.transaction()
        transaction.create(self.offsets_path)
        for event_type in sorted({key[0] for key in offsets}):
            transaction.create(f"{self.offsets_path}/{event_type}")
        for key in sorted(offsets, key=key_order):
            transaction.create(self.offset_path(key), offsets[key].encode())
        results = transaction.commit()
        failed = [r for r in results if isinstance(r, Exception)]
        if not failed:
            return True
        if any(isinstance(r, NodeExistsError) for r in failed):
            return False
        raise failed[0]

    def offsets_initialized(self) -> bool:
        return self.zookeeper.exists(self.offsets_path) is not None

    def starting_checks(self) -> tuple[bool, bool]:
        """Whether a cursor reset runs and whether the starting offsets are stored,
        what a stream checks before it registers, read in one round trip."""
        resetting, offsets_stored = self._exist(self.reset_path, self.offsets_path)
        return resetting, offsets_stored

    def committed_many(self, keys: Iterable[PartitionKey]) -> dict[PartitionKey, str | None]:
        """The committed offsets of partitions (None for one where none was ever
        stored), in one round trip: the reads run at once."""
        zookeeper = self.zookeeper
        pending = {key: zookeeper.get_async(self.offset_path(key)) for key in keys}
        found: dict[PartitionKey, str | None] = {}
        for key, result in pending.items():
            try:
                data, _ = result.get()
                found[key] = data.decode()
            except NoNodeError:
                found[key] = None
        return found

    def announced(self, session_id: str, watch: Watch
                  ) -> tuple[dict[PartitionKey, str], int] | None:
        """What the last commit for the stream committed, and how many commits there
        were (the node's version); None once the stream's session is gone. ``watch``
        fires once on the next commit for the stream, on whatever instance."""
        try:
            data, stat = self.zookeeper.get(f"{self.commits_path}/{session_id}", watch=watch)
        except NoNodeError:
            return None
        return _announcement_from(data), stat.version

    def announce(self, session_id: str, offsets: Mapping[PartitionKey, str]) -> None:
        """Tell the stream what was committed for it, after a commit that was not
        written in one transaction with its announcement."""
        with contextlib.suppress(NoNodeError):  # the stream ended
            self.zookeeper.set(f"{self.commits_path}/{session_id}", _announcement_json(offsets))

    def commit_check(self, session_id: str, keys: Iterable[PartitionKey]) -> CommitCheck:
        """What a commit decides on, read in one round trip: whether the session is
        open, the topology, and each partition's committed offset with its version."""
        zookeeper = self.zookeeper
        session = zookeeper.exists_async(f"{self.sessions_path}/{session_id}")
        topology = zookeeper.get_async(self.topology_path)
        offsets = {key: zookeeper.get_async(self.offset_path(key)) for key in set(keys)}
        current: dict[PartitionKey, tuple[str, int] | None] = {}
        for key, result in offsets.items():
            try:
                data, stat = result.get()
                current[key] = (data.decode(), stat.version)
            except NoNodeError:
                current[key] = None
        if session.get() is None:
            return CommitCheck(False, Topology(()), None, current)
        try:
            data, stat = topology.get()
        except NoNodeError:
            if zookeeper.exists(self.root) is None:
                raise SubscriptionGone(self.root) from None
            return CommitCheck(True, Topology(()), None, current)
        return CommitCheck(True, _topology_from(data), stat.version, current)

    def commit_all(self, offsets: Mapping[PartitionKey, str],
                   current: Mapping[PartitionKey, tuple[str, int] | None]
                   ) -> tuple[set[PartitionKey], dict[PartitionKey, int]]:
        """Write each partition's new offset (further than its ``current`` one, as read
        by ``commit_check``) at once; where another commit came in between, fall back
        to ``commit``, which moves the offset only forward. Returns the partitions
        whose offset another commit had already moved as far or further, and the new
        versions of the offsets written at once."""
        zookeeper = self.zookeeper
        writes = {}
        for key, offset in offsets.items():
            known = current.get(key)
            if known is not None:
                writes[key] = zookeeper.set_async(self.offset_path(key), offset.encode(),
                                                  version=known[1])
        outdated = set()
        versions = {}
        for key, result in writes.items():
            try:
                versions[key] = result.get().version
            except (BadVersionError, NoNodeError):
                if not self.commit(key, offsets[key]):
                    outdated.add(key)
        for key, offset in offsets.items():
            if current.get(key) is None and not self.commit(key, offset):
                outdated.add(key)
        return outdated, versions

    def commit_if_unchanged(self, session_id: str, offsets: Mapping[PartitionKey, str],
                            topology_version: int, versions: Mapping[PartitionKey, int],
                            announce: bool = True) -> dict[PartitionKey, int] | None:
        """Write the offsets, and unless ``announce`` is False announce them to the
        stream, in one multi-operation, on condition that the session is open (its
        commits node is there: they come and go together) and the topology and each
        offset are still at the versions given. The offsets' new versions, or None
        when a condition failed (nothing is written). Without the announcement the
        stream's commits watch does not fire: its process tells it instead, and the
        node's version counts only the commits announced."""
        transaction = self.zookeeper.transaction()
        commits_path = f"{self.commits_path}/{session_id}"
        if announce:
            transaction.set_data(commits_path, _announcement_json(offsets))
        else:
            transaction.check(commits_path, ANY_VERSION)
        transaction.check(self.topology_path, topology_version)
        for key, offset in offsets.items():
            transaction.set_data(self.offset_path(key), offset.encode(), versions[key])
        results = transaction.commit()
        if any(isinstance(result, Exception) for result in results):
            return None
        return {key: stat.version for key, stat in zip(offsets, results[2:], strict=True)}

    def commit(self, key: PartitionKey, offset: str) -> bool:
        """Move the partition's committed offset forward to ``offset``; False when
        it already was there or further (offset strings sort as events do)."""
        path = self.offset_path(key)
        while True:
            try:
                data, stat = self.zookeeper.get(path)
            except NoNodeError:
                try:
                    self.zookeeper.create(path, offset.encode())
                    return True
                except NodeExistsError:
                    continue
                except NoNodeError:
                    raise SubscriptionGone(self.root) from None
            if data.decode() >= offset:
                return False
            try:
                self.zookeeper.set(path, offset.encode(), version=stat.version)
                return True
            except BadVersionError:
                continue

    def overwrite_offsets(self, offsets: Mapping[PartitionKey, str]) -> None:
        """Set committed offsets to these values, backwards too (a cursor reset)."""
        for key, offset in offsets.items():
            try:
                self.zookeeper.set(self.offset_path(key), offset.encode())
            except NoNodeError:
                try:
                    self.zookeeper.create(self.offset_path(key), offset.encode())
                except NoNodeError:
                    raise SubscriptionGone(self.root) from None

    # Cursor reset

    def begin_reset(self) -> None:
        """Mark a reset as running (ephemeral: a crashed reset leaves no mark)."""
        self.zookeeper.ensure_path(self.root)
        try:
            self.zookeeper.create(self.reset_path, ephemeral=True)
        except NodeExistsError:
            raise ResetInProgress(self.root) from None

    def end_reset(self) -> None:
        with contextlib.suppress(NoNodeError):
            self.zookeeper.delete(self.reset_path)
