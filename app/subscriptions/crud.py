"""Creating, reading, listing, changing and deleting subscriptions: the rules.

A subscription is identified by its key (owning application, set of event
types, consumer group): creating one whose key exists answers the existing
one, as it is, before the rules that depend on the event types' current
state (existence, partitions, offsets) are checked again. Only the
authorization of a subscription may change.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from kazoo.exceptions import KazooException

from app.api.lookups import partition_bounds
from app.coordination.subscription_nodes import remove_subscription_state
from app.coordination.subscription_state import SubscriptionState
from app.coordination.zookeeper import ZooKeeperUnavailable
from app.cursors import BEGIN, CursorInvalid, is_partition, resolve
from app.domain.event_type import EventType
from app.domain.subscription import InitialCursor, ReadFrom, Subscription
from app.domain.timeline import Timelines
from app.repository import subscriptions as repository
from app.services import services
from app.subscriptions.body import (
    SubscriptionBody,
    SubscriptionInvalid,
    parse_body,
    subscription_view,
)
from app.subscriptions.partitions import EventTypeGone, subscription_partitions
from app.subscriptions.stats import subscription_status

DEFAULT_CONSUMER_GROUP = "default"
DEFAULT_READ_FROM: ReadFrom = "end"

log = logging.getLogger(__name__)


class SubscriptionNotFound(Exception):
    """No subscription has that id (a 404)."""

    def __init__(self, subscription_id: str) -> None:
        super().__init__(f"Subscription '{subscription_id}' does not exist.")
        self.detail = str(self)


class SubscriptionCreationDisabled(Exception):
    """Creating subscriptions is switched off by a feature toggle (a 503)."""


def _required(parsed: SubscriptionBody) -> tuple[str, tuple[str, ...]]:
    """The owning application and event types, which a body must give."""
    missing = [field for field in ("owning_application", "event_types")
               if getattr(parsed, field) is None]
    if missing or parsed.owning_application is None or parsed.event_types is None:
        raise SubscriptionInvalid([f"{field}: is required" for field in missing])
    return parsed.owning_application, parsed.event_types


def _timelines(event_types: Sequence[str]) -> dict[str, tuple[EventType, Timelines]]:
    """Every event type with its timelines; a 422 naming those that do not exist,
    or when together they have more partitions than a subscription may read."""
    most = services().settings.max_subscription_partitions
    # Every event type has a partition at least: too many names fail before any lookup.
    if len(event_types) > most:
        raise SubscriptionInvalid([f"event_types: {len(event_types)} event types have at "
                                   f"least {len(event_types)} partitions; a subscription may "
                                   f"read at most {most}"])
    timelines, missing = {}, []
    for name in event_types:
        found = services().event_types.get(name)
        if found is None:
            missing.append(name)
        else:
            timelines[name] = found
    if missing:
        raise SubscriptionInvalid([_missing_detail(missing)])
    total = sum(timeline.partitions for _, timeline in timelines.values())
    if total > most:
        raise SubscriptionInvalid([f"event_types: the event types have {total} partitions "
                                   f"together; a subscription may read at most {most}"])
    return timelines


def _missing_detail(names: Sequence[str]) -> str:
    return f"event_types: {', '.join(repr(name) for name in names)} " + (
        "does not exist" if len(names) == 1 else "do not exist")


def _checked_cursors(cursors: Sequence[InitialCursor], timelines: Mapping[str, Timelines]
                     ) -> None:
    """The cursors name every partition of the event types once, at an offset that is
    available now (or ``begin``); otherwise a 422 naming the cursor at fault."""
    if not cursors:
        raise SubscriptionInvalid(["initial_cursors: required when read_from is 'cursors': "
                                   "give one cursor for every partition of the event types"])
    named: set[tuple[str, int]] = set()
    for index, cursor in enumerate(cursors):
        where = f"initial_cursors[{index}]"
        timeline = timelines.get(cursor.event_type)
        if timeline is None:
            raise SubscriptionInvalid([f"{where}: event type '{cursor.event_type}' is not one "
                                       "of the subscription's event_types"])
        if not is_partition(cursor.partition, timeline.partitions):
            raise SubscriptionInvalid([f"{where}: partition '{cursor.partition}' does not exist; "
                                       f"'{cursor.event_type}' has partitions \"0\" to "
                                       f"\"{timeline.partitions - 1}\""])
        partition = int(cursor.partition)
        if (cursor.event_type, partition) in named:
            raise SubscriptionInvalid([f"{where}: partition '{cursor.partition}' of "
                                       f"'{cursor.event_type}' has a cursor already"])
        named.add((cursor.event_type, partition))
    uncovered = [f"'{name}' partition '{partition}'"
                 for name, timeline in sorted(timelines.items())
                 for partition in range(timeline.partitions) if (name, partition) not in named]
    if uncovered:
        raise SubscriptionInvalid([f"initial_cursors: no cursor for {', '.join(uncovered)}; "
                                   "give one for every partition of the event types"])
    bounds = {name: partition_bounds(timeline) for name, timeline in timelines.items()}
    for index, cursor in enumerate(cursors):
        if cursor.offset == BEGIN:
            continue
        try:
            resolve({"partition": cursor.partition, "offset": cursor.offset},
                    timelines[cursor.event_type], bounds[cursor.event_type])
        except CursorInvalid as error:
            raise SubscriptionInvalid([f"initial_cursors[{index}] of '{cursor.event_type}': "
                                       f"{error}"]) from None


def create_subscription(body: Any, creation_disabled: bool = False,
                        may_read: Callable[[Sequence[EventType]], None] = lambda _: None
                        ) -> tuple[Subscription, bool]:
    """The subscription a POST body asks for, and whether it is new (False: one with
    its key existed, and is answered as it is). While ``creation_disabled`` only an
    existing one is answered; otherwise SubscriptionCreationDisabled. ``may_read`` is
    given the event types of a new one first, to refuse a caller who may not read
    them (its cursors' checks would tell the partitions' offsets, its stats the
    events' count)."""
    parsed = parse_body(body)
    owning_application, event_types = _required(parsed)
    consumer_group = parsed.consumer_group or DEFAULT_CONSUMER_GROUP
    pool = services().pool
    existing = repository.find_by_key(pool, owning_application, event_types, consumer_group)
    if existing is not None:
        return existing, False
    if creation_disabled:
        raise SubscriptionCreationDisabled("Creating subscriptions is disabled for now; "
                                           "existing ones can be used, try again later.")
    found = _timelines(event_types)
    may_read([event_type for event_type, _ in found.values()])
    timelines = {name: timeline for name, (_, timeline) in found.items()}
    read_from = parsed.read_from or DEFAULT_READ_FROM
    # Cursors mean something only when reading from them; otherwise they are ignored.
    initial_cursors = (parsed.initial_cursors or ()) if read_from == "cursors" else ()
    if read_from == "cursors":
        _checked_cursors(initial_cursors, timelines)
    now = datetime.now(UTC)
    subscription = Subscription(
        id=str(uuid.uuid4()), owning_application=owning_application,
        event_types=tuple(sorted(event_types)), consumer_group=consumer_group,
        read_from=read_from, created_at=now, updated_at=now,
        initial_cursors=initial_cursors, authorization=parsed.authorization)
    try:
        return repository.insert_subscription(pool, subscription)
    except repository.EventTypesMissing as missing:
        raise SubscriptionInvalid([_missing_detail(missing.names)]) from None


def get_subscription(subscription_id: str) -> Subscription:
    found = repository.get_subscription(services().pool, subscription_id)
    if found is None:
        raise SubscriptionNotFound(subscription_id)
    return found


def list_subscriptions(owning_application: str | None, event_types: Sequence[str],
                       offset: int, limit: int) -> repository.SubscriptionPage:
    """A page of subscriptions, newest first, that belong to the owning application
    (when given) and read all of ``event_types``."""
    return repository.list_subscriptions(services().pool, owning_application, event_types,
                                         offset, limit)


def listed_views(subscriptions: Sequence[Subscription], show_status: bool,
                 may_view: Callable[[Subscription], object]) -> list[dict[str, Any]]:
    """The items of a listing; with ``show_status`` each that ``may_view`` allows has
    the ``status`` of its partitions (who streams them: the stream ids commits need),
    as its stats would."""
    views = [subscription_view(subscription) for subscription in subscriptions]
    if show_status:
        for view, subscription in zip(views, subscriptions, strict=True):
            if may_view(subscription):
                view["status"] = _status(subscription)
    return views


def _status(subscription: Subscription) -> list[dict[str, Any]]:
    try:
        partitions = subscription_partitions(subscription, services().event_types.get)
    except EventTypeGone:
        return []
    return subscription_status(subscription, partitions,
                               SubscriptionState(services().zookeeper, subscription.id))


def _changed_fields(stored: Subscription, parsed: SubscriptionBody) -> list[str]:
    """The fields other than authorization that the body sets to another value."""
    changed = []
    for field in ("owning_application", "consumer_group", "read_from"):
        sent = getattr(parsed, field)
        if sent is not None and sent != getattr(stored, field):
            changed.append(field)
    if parsed.event_types is not None and set(parsed.event_types) != set(stored.event_types):
        changed.append("event_types")
    read_from = parsed.read_from or stored.read_from
    if (read_from == "cursors" and parsed.initial_cursors is not None
            and set(parsed.initial_cursors) != set(stored.initial_cursors)):
        changed.append("initial_cursors")
    return changed


def update_subscription(subscription_id: str, body: Any) -> Subscription:
    """Apply a PUT body: only ``authorization`` may change; other fields may be sent
    with their stored values or left out."""
    stored = get_subscription(subscription_id)
    parsed = parse_body(body)
    changed = _changed_fields(stored, parsed)
    if changed:
        raise SubscriptionInvalid([f"{field}: cannot be changed; only authorization can"
                                   for field in changed])
    if parsed.authorization is None:
        return stored
    updated = repository.update_authorization(services().pool, stored.id,
                                              parsed.authorization, datetime.now(UTC))
    if updated is None:
        raise SubscriptionNotFound(subscription_id)
    return updated


def delete_subscription(subscription_id: str) -> None:
    """Delete the subscription, then its coordination state, which ends its streams."""
    current = services()
    if not (repository.is_subscription_id(subscription_id)
            and repository.delete_subscription(current.pool, subscription_id)):
        raise SubscriptionNotFound(subscription_id)
    try:
        # Ids are stored, and named in ZooKeeper, in lower case.
        remove_subscription_state(current.zookeeper, subscription_id.lower())
    except (KazooException, ZooKeeperUnavailable) as error:
        # The row is gone, so no stream can start again; leftover nodes only take room.
        log.error("removing the ZooKeeper state of deleted subscription %s failed: %r",
                  subscription_id, error)
