"""The subscription stream: one client's share of a subscription's partitions.

An explicit state machine:

- ``starting`` (``start``, in the request, before any byte is sent): refuse
  while a cursor reset runs, store the starting offsets on the first stream,
  register the session, rebalance, and refuse (409) when nothing is left for
  this stream;
- ``streaming`` (``lines``): read the partitions the topology gives this
  session from their committed offsets, batch them (``app.streaming``), pause
  at ``max_uncommitted_events``, hand a partition over when the topology says
  ``reassigning`` once its batches are committed; ZooKeeper watches (topology,
  sessions, the stream's own session node, the reset marker, the commits
  announced for it) wake the loop, nothing is polled per event;
- ``closing`` (after a limit ended the stream, or its client left, with events
  sent and not committed): the session is marked closing, so its partitions go to
  newer streams, each as soon as what was sent of it is committed; it stays until
  the client committed what it was sent or ``commit_timeout`` ran out, counted as
  while streaming (the spec: the client "still has 60 seconds to commit the events
  it received from the moment when the events were sent");
- ``cleanup``: readers closed, session removed, partitions rebalanced.

A stream whose subscription was deleted or reset, whose reader lost the right to
read it, whose ZooKeeper session was lost, or that ran out of ``commit_timeout``,
skips ``closing``. At-least-once: a partition always restarts after its committed
offset, whoever streams it next.
"""

from __future__ import annotations

import logging
import socket
import time
import uuid
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence

import gevent
import gevent.event
from kazoo.exceptions import KazooException
from kazoo.handlers.gevent import SequentialGeventHandler
from kazoo.protocol.states import KazooState

from app import lifecycle
from app.coordination.subscription_state import (
    ResetInProgress,
    SubscriptionGone,
    SubscriptionState,
)
from app.dependencies import DependencyUnavailable
from app.domain.subscription import Subscription
from app.domain.topology import PartitionKey, Session, Topology, key_order
from app.storage.across_timelines import SwitchWatch
from app.storage.engine import StorageEngine, StorageError, TopicNotFound
from app.streaming.batcher import Batch, Batcher
from app.streaming.connection import client_gone
from app.streaming.lines import batch_line, joined
from app.streaming.positions import TakenPositions
from app.subscriptions import known_offsets, local_streams
from app.subscriptions.commit_tracker import CommitTracker, HeldPartition
from app.subscriptions.cursors import cursor_tokens
from app.subscriptions.departure import leave
from app.subscriptions.partitions import SubscriptionPartitions
from app.subscriptions.readers import PartitionReaders
from app.subscriptions.stream_options import Phase, StreamRefused, SubscriptionStreamParams

CHECK_INTERVAL_S = 1.0
CLIENT_LEFT = "the client disconnected"

log = logging.getLogger(__name__)


class SubscriptionStream:
    def __init__(self, subscription: Subscription, partitions: SubscriptionPartitions,
                 state: SubscriptionState, engine_for: Callable[[str], StorageEngine],
                 params: SubscriptionStreamParams, connection: socket.socket | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 refusal: Callable[[], str | None] = lambda: None,
                 on_batch: Callable[[str, int, int], None] = lambda *_: None,
                 switch_watch: Callable[[str], SwitchWatch] | None = None) -> None:
        self.id = str(uuid.uuid4())
        self._on_batch = on_batch  # (event type, events, bytes) of each line sent
        self.phase = Phase.STARTING
        self._subscription = subscription
        self._partitions = partitions
        self._state = state
        self._params = params
        self._connection = connection
        self._clock = clock
        self._reader_refusal = refusal  # the reader's rights, re-checked while streaming
        self._session = Session(self.id, params.requested)
        self._wake = gevent.event.Event()
        self._readers = PartitionReaders(partitions, engine_for, self._wake,
                                         read_ahead=params.max_uncommitted_events,
                                         switch_watch=switch_watch)
        self._batcher: Batcher[PartitionKey] = Batcher(params.limits, (), clock)
        self._taken: TakenPositions[PartitionKey] = TakenPositions({})
        self._held: dict[PartitionKey, HeldPartition] = {}
        self._commits = CommitTracker(self.id, self._held, state, partitions, params,
                                      self._wake, clock)
        self._topology_changed = self._sessions_changed = self._control_changed = True
        self._end_reason: str | None = None
        self._graceful = False
        self._started = False
        self._zookeeper_lost = False
        self._ends_at = clock() + params.limits.stream_timeout
        self._tokens = cursor_tokens()

    # starting

    def start(self, starting_offsets: Callable[[], dict[PartitionKey, str]]) -> None:
        """Register the session and take partitions; ``StreamRefused`` leaves nothing behind.
        ``starting_offsets`` is asked only when the subscription has none stored yet."""
        state = self._state
        resetting, offsets_stored = state.starting_checks()
        if resetting:
            raise StreamRefused(409, "a cursor reset of this subscription is in progress; "
                                     "reconnect once it is done")
        if not offsets_stored:
            state.initialize_offsets(starting_offsets())
        if self._params.requested:
            self._taken_directly()
        state.register(self._session)
        local_streams.opened(self.id, self._commits.committed_here)
        state.zookeeper.add_listener(self._connection_changed)
        try:
            # The sessions watch is armed here: the first turn rebalances again only
            # if a stream came or went since.
            self._sessions_changed = False
            topology = state.rebalance(self._partitions.partition_keys(),
                                       self._signal("_sessions_changed"))
            mine = topology.heading_to(self.id)
            if not mine or not self._params.requested <= {p.key for p in mine}:
                raise StreamRefused(409, self._refusal(topology))
            self._commits.watch_commits()
        except BaseException:
            self._leave()
            raise
        self.phase = Phase.STREAMING

    def _taken_directly(self) -> None:
        for other in self._state.sessions():
            taken = other.requested & self._params.requested
            if taken and not other.closing:
                names = ", ".join(f"{et}:{p}" for et, p in sorted(taken, key=key_order))
                raise StreamRefused(409, f"partitions {names} are already read by another "
                                         "stream that asked for them directly")

    def _refusal(self, topology: Topology) -> str:
        if self._params.requested:
            return ("a partition asked for is being taken by another stream that asked for "
                    "it directly")
        return (f"no free partition: this subscription has {len(topology.partitions)} "
                "partitions and each is read by another stream; close one or wait")

    # streaming

    def lines(self) -> Generator[bytes, None, None]:
        """The stream's lines; ending it (also by closing the iterator) starts closing."""
        try:
            yield from self._stream()
        except GeneratorExit:
            self._end_reason = self._end_reason or CLIENT_LEFT
            raise
        except SubscriptionGone:
            self._end_reason = "the subscription was deleted"
        except ResetInProgress:
            self._end_reason = "the cursors of the subscription are being reset"
        except (KazooException, SequentialGeventHandler.timeout_exception) as error:
            self._end_reason = f"ZooKeeper failed: {error!r}"
            log.warning("subscription stream %s ended: %s", self.id, self._end_reason)
        except TopicNotFound:
            self._end_reason = "an event type of the subscription was deleted"
        except StorageError as error:
            self._end_reason = f"the storage failed: {error}"
            log.warning("subscription stream %s ended: %s", self.id, error)
        except DependencyUnavailable as error:
            self._end_reason = str(error)
            log.warning("subscription stream %s ended: %s", self.id, error)
        else:
            return
        yield from self._goodbye(self._end_reason)

    def _stream(self) -> Iterator[bytes]:
        while True:
            self._wake.clear()
            ending = self._ending()
            if ending is not None:
                self._end_reason, self._graceful = ending
                if self._graceful:
                    yield from joined(self._send(self._batcher.pending_batches()))
                elif self._end_reason != CLIENT_LEFT:
                    yield from self._goodbye(self._end_reason)
                return
            self._follow_zookeeper()
            self._take_read_events()
            # A turn's lines go out together (``joined``), as the low-level stream's do.
            lines = list(self._send(self._batcher.full_batches()))
            if self._batcher.stream_limit_reached():
                yield from joined(lines)
                continue  # ends on the next turn, the pending batches sent
            if self._paused():
                # Nothing more can join the buffered events until a commit: send them.
                lines += self._send(self._batcher.pending_batches())
            yield from joined(lines, self._send(self._batcher.due_batches()))
            if self._batcher.keep_alive_limit_reached():
                continue  # ends on the next turn, not a flush timeout later
            self._commits.hand_over_committed()
            self._readers.want(self._capacity(),
                               self._batcher.room() - self._batcher.buffered())
            now = self._clock()
            wait = min(self._batcher.next_due(), self._ends_at, now + CHECK_INTERVAL_S) - now
            if not self._readers.inbox or self._capacity() <= 0:
                self._wake.wait(max(0.0, wait))

    def time_left(self) -> float:
        """Seconds until ``commit_timeout`` (when events await a commit) or
        ``stream_timeout`` ends the stream, also while a write waits on a client that
        stopped reading."""
        deadline = self._ends_at
        if self._commits.commit_deadline is not None:
            deadline = min(deadline, self._commits.commit_deadline)
        return deadline - self._clock()

    def _ending(self) -> tuple[str, bool] | None:
        """Why the stream should end now, and whether gracefully (pending batches sent,
        commits awaited); None to go on."""
        now = self._clock()
        if self._readers.error is not None:
            raise self._readers.error
        if self._zookeeper_lost:
            return "the connection to ZooKeeper was lost", False
        if lifecycle.is_shutting_down():
            return "the server is shutting down", False
        if client_gone(self._connection):
            return CLIENT_LEFT, False
        refused = self._reader_refusal()
        if refused is not None:
            return refused, False
        if self._commits.timed_out(now):
            return "commit_timeout reached: no commit came for the events sent", False
        if now >= self._ends_at:
            return "stream_timeout reached", True
        if self._batcher.stream_limit_reached():
            return "stream_limit reached", True
        if self._batcher.keep_alive_limit_reached():
            return "stream_keep_alive_limit reached", True
        return None

    def _connection_changed(self, state: str) -> None:
        """kazoo's listener: without ZooKeeper the stream can neither see rebalances nor
        take commits, so it ends. Only sets flags (it runs in kazoo's greenlet)."""
        if state in (KazooState.LOST, KazooState.SUSPENDED):
            self._zookeeper_lost = True
            self._wake.set()

    def _signal(self, flag: str) -> Callable[[object], None]:
        def fired(_event: object) -> None:
            setattr(self, flag, True)
            self._wake.set()
        return fired

    def _follow_zookeeper(self) -> None:
        """Act on what the watches reported, arming them again."""
        state = self._state
        if self._control_changed:
            self._check_control()
        if self._sessions_changed:
            self._sessions_changed = False
            state.rebalance(self._partitions.partition_keys(), self._signal("_sessions_changed"))
        if self._topology_changed:
            self._topology_changed = False
            self._follow(state.topology(watch=self._signal("_topology_changed")))
        self._commits.read_if_quiet()
        self._commits.apply_commits()

    def _follow(self, topology: Topology) -> None:
        """Stream what the topology gives this session; stop what it takes away."""
        streaming: set[PartitionKey] = set()
        releasing: set[PartitionKey] = set()
        for p in topology.held_by(self.id):
            (releasing if p.state == "reassigning" else streaming).add(p.key)
        changed = False
        for key in list(self._held):
            if key not in streaming and key not in releasing:
                self._drop(key)
                changed = True
            elif key in releasing and self._held[key].releasing_since is None:
                # Stop reading it; buffered events go back (the next owner reads them).
                self._held[key].releasing_since = self._clock()
                self._batcher.remove(key)
                self._held[key].read = self._held[key].sent
                self._taken.reset(key, self._held[key].sent)
                changed = True
            elif key in streaming and self._held[key].releasing_since is not None:
                # The hand-over was called off: read it again.
                self._held[key].releasing_since = None
                self._batcher.add(key)
                changed = True
        # A partition can be moving away before this stream ever read it (another
        # stream started before this one's first turn): held with nothing sent, it is
        # handed over at once.
        new = sorted((streaming | releasing) - set(self._held), key=key_order)
        for key, committed in self._state.committed_many(new).items():
            position = self._commits.position(key, committed)
            self._held[key] = HeldPartition(position, position, position)
            self._taken.reset(key, position)
            if key in releasing:
                self._held[key].releasing_since = self._clock()
            else:
                self._batcher.add(key)
            changed = True
        if changed:
            self._readers.read({key: held.read for key, held in self._held.items()
                                if held.releasing_since is None})

    def _drop(self, key: PartitionKey) -> None:
        held = self._held.pop(key)
        self._taken.forget(key)
        if held.releasing_since is None:
            self._batcher.remove(key)

    def _take_read_events(self) -> None:
        for event_type, runs in self._readers.inbox.take(self._capacity()):
            for run in runs:
                key = (event_type, str(run.partition))
                held = self._held.get(key)
                if held is None or held.releasing_since is not None:
                    continue  # a partition given up
                # On from where the partition was: what lies before was read already. A
                # run past it follows events that are gone (retention, a cleaned-up
                # timeline): the reader went on from the oldest there is.
                skip = max(0, held.read + 1 - run.first)
                if skip >= len(run.payloads):
                    continue
                payloads = run.payloads[skip:]
                self._taken.take(key, run.first + skip, len(payloads))
                held.read = run.first + skip + len(payloads) - 1
                self._batcher.take(key, payloads)
                known_offsets.learn(self._partitions.timelines[event_type].items[0].id,
                                    run.partition, held.read)

    def _capacity(self) -> int:
        """How many more events may be taken into batches now."""
        buffered = self._batcher.buffered()
        return min(self._batcher.room() - buffered,
                   self._params.max_uncommitted_events - self._commits.uncommitted() - buffered)

    def _paused(self) -> bool:
        """Whether events wait in batches that only a commit lets out."""
        buffered = self._batcher.buffered()
        return buffered > 0 and \
            self._commits.uncommitted() + buffered >= self._params.max_uncommitted_events

    def _send(self, batches: Iterable[Batch[PartitionKey]]) -> Iterator[bytes]:
        for key, payloads in batches:
            held = self._held[key]
            held.sent = self._taken.send(key, len(payloads))
            if payloads:
                self._commits.sent()
            yield self._line(key, held.sent, payloads)

    def _line(self, key: PartitionKey, position: int, payloads: Sequence[bytes],
              debug: str | None = None) -> bytes:
        cursor = {"partition": key[1], "offset": self._partitions.client_offset(key, position),
                  "event_type": key[0], "cursor_token": next(self._tokens)}
        if not self._started:
            self._started = True
            debug = debug or "Stream started"
        line = batch_line(cursor, payloads, {"debug": debug} if debug else None)
        self._on_batch(key[0], len(payloads), len(line))
        return line

    def _goodbye(self, reason: str) -> Iterator[bytes]:
        """A last keep-alive saying why the stream ends, when there is a cursor to give."""
        for key, held in sorted(self._held.items(), key=lambda item: key_order(item[0])):
            yield self._line(key, held.sent, [], f"Stream closed: {reason}")
            return

    # closing and cleanup

    def end(self) -> None:
        """Called once the response is over: wait for commits in the background if
        the stream ended by a limit or its client left with events uncommitted, else
        clean up now."""
        self._readers.close()
        awaits_commits = self._graceful or self._end_reason == CLIENT_LEFT
        if awaits_commits and self._commits.uncommitted() > 0 and self.phase == Phase.STREAMING:
            self.phase = Phase.CLOSING
            gevent.spawn(self._close)
        else:
            self._cleanup()

    def _close(self) -> None:
        try:
            self._state.mark_closing(self._session)
            self._state.rebalance(self._partitions.partition_keys())
            self._topology_changed = True
            deadline = self._commits.commit_deadline or \
                self._clock() + self._params.commit_timeout
            while self._commits.uncommitted() > 0 and self._clock() < deadline \
                    and not lifecycle.is_shutting_down() and not self._zookeeper_lost:
                self._wake.clear()
                self._commits.read_if_quiet()
                self._commits.apply_commits()  # read by the watch armed while streaming
                if self._control_changed:
                    # A reset waits for this session, and discards its commits anyway.
                    self._check_control()
                self._release_committed()
                if self._commits.uncommitted() > 0:
                    self._wake.wait(min(CHECK_INTERVAL_S, max(0.0, deadline - self._clock())))
        except (KazooException, SubscriptionGone, ResetInProgress) as error:
            log.info("closing subscription stream %s: %r", self.id, error)
        finally:
            self._cleanup()

    def _release_committed(self) -> None:
        """While closing: a partition that a newer stream waits for (``reassigning``)
        goes to it once what was sent of it is committed, not when the others are."""
        if self._topology_changed:
            self._topology_changed = False
            topology = self._state.topology(watch=self._signal("_topology_changed"))
            for p in topology.held_by(self.id):
                held = self._held.get(p.key)
                if p.state == "reassigning" and held is not None \
                        and held.releasing_since is None:
                    held.releasing_since = self._clock()
        self._commits.hand_over_committed()

    def _check_control(self) -> None:
        """``SubscriptionGone`` when the session was removed, ``ResetInProgress`` while a
        reset runs; watching for either again."""
        self._control_changed = False
        session_open, resetting = self._state.control(self.id, self._signal("_control_changed"))
        if not session_open:
            raise SubscriptionGone(self._state.root)
        if resetting:
            raise ResetInProgress(self._state.root)

    def _cleanup(self) -> None:
        self.phase = Phase.CLEANUP
        self._leave()
        self.phase = Phase.ENDED
        log.info("subscription stream %s of %s ended: %s", self.id, self._subscription.id,
                 self._end_reason or "done")

    def _leave(self) -> None:
        """Remove the session and give its partitions to the others."""
        self._readers.close()
        self._state.zookeeper.remove_listener(self._connection_changed)
        local_streams.closed(self.id)
        leave(self._state, self.id, self._partitions.partition_keys())
