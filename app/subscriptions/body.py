"""The JSON form of a subscription: request bodies checked for shape, and responses.

``parse_body`` reads the fields a client may set, checks their types and
forms, and leaves the rules that need the event types (existence, partitions,
offsets) to ``app.subscriptions.crud``. Unknown fields and the read-only ones
(``id``, ``created_at``, ``updated_at``, ``status``) are ignored; ``null``
counts as absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, get_args

from app.cursors import BEGIN, CursorInvalid, check_shape
from app.domain.event_type import MAX_AUTHORIZATION_ATTRIBUTES
from app.domain.subscription import InitialCursor, ReadFrom, Subscription
from app.registry.timestamps import rfc3339

MAX_TEXT_LENGTH = 255
READ_FROM: tuple[str, ...] = get_args(ReadFrom)
AUTHORIZATION_SECTIONS = ("admins", "readers")


class SubscriptionInvalid(Exception):
    """A subscription body that breaks a rule (a 422); ``detail`` names every field at fault."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__(self.detail)

    @property
    def detail(self) -> str:
        return "; ".join(self.errors)


@dataclass(frozen=True)
class SubscriptionBody:
    """The settable fields of a body, checked for shape; None where absent."""

    owning_application: str | None = None
    event_types: tuple[str, ...] | None = None
    consumer_group: str | None = None
    read_from: ReadFrom | None = None
    initial_cursors: tuple[InitialCursor, ...] | None = None
    authorization: dict[str, Any] | None = None


def text_problem(value: Any) -> str | None:
    """Why ``value`` is not a usable name (a short non-empty string the database can
    store), or None when it is."""
    if not isinstance(value, str):
        return "must be a string"
    if not value.strip():
        return "must not be empty"
    if len(value) > MAX_TEXT_LENGTH:
        return f"must be at most {MAX_TEXT_LENGTH} characters long"
    if "\x00" in value:
        return "must not contain NUL characters"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "must not contain unpaired surrogates"
    return None


def _text(body: Mapping[str, Any], field: str, errors: list[str]) -> str | None:
    value = body.get(field)
    if value is None:
        return None
    problem = text_problem(value)
    if problem:
        errors.append(f"{field}: {problem}")
        return None
    return value


def _event_types(body: Mapping[str, Any], errors: list[str]) -> tuple[str, ...] | None:
    value = body.get("event_types")
    if value is None:
        return None
    if not isinstance(value, list):
        errors.append("event_types: must be an array of event type names")
        return None
    if not value:
        errors.append("event_types: must name at least one event type")
        return None
    for index, name in enumerate(value):
        problem = text_problem(name)
        if problem:
            errors.append(f"event_types[{index}]: {problem}")
            return None
    # A set, as in Nakadi: a name given twice is the same subscription as given once.
    return tuple(dict.fromkeys(value))


def _read_from(body: Mapping[str, Any], errors: list[str]) -> ReadFrom | None:
    value = body.get("read_from")
    if value is None or value in READ_FROM:
        return value
    shown = repr(value) if isinstance(value, str) and len(value) <= MAX_TEXT_LENGTH else "that"
    errors.append(f"read_from: must be one of {', '.join(READ_FROM)}, not {shown}")
    return None


def _initial_cursor(item: Any, index: int) -> InitialCursor:
    where = f"initial_cursors[{index}]"
    if not isinstance(item, Mapping):
        raise CursorInvalid(f"{where}: must be an object with event_type, partition and offset")
    problem = text_problem(item.get("event_type"))
    if problem:
        raise CursorInvalid(f"{where}.event_type: {problem}")
    try:
        partition, offset = check_shape(item)
    except CursorInvalid as error:
        raise CursorInvalid(f"{where}: {error}") from None
    for field, value in (("partition", partition), ("offset", offset)):
        problem = text_problem(value)
        if problem:
            raise CursorInvalid(f"{where}.{field}: {problem}")
    # Stored with one spelling of ``begin``, so readers compare with BEGIN alone.
    return InitialCursor(item["event_type"], partition,
                         BEGIN if offset.lower() == BEGIN else offset)


def _initial_cursors(body: Mapping[str, Any], errors: list[str]
                     ) -> tuple[InitialCursor, ...] | None:
    value = body.get("initial_cursors")
    if value is None:
        return None
    if not isinstance(value, list):
        errors.append("initial_cursors: must be an array of cursors")
        return None
    try:
        return tuple(_initial_cursor(item, index) for index, item in enumerate(value))
    except CursorInvalid as error:
        errors.append(str(error))
        return None


def _attributes(value: Any, where: str) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise ValueError(f"{where}: must be a non-empty array of attributes")
    if len(value) > MAX_AUTHORIZATION_ATTRIBUTES:
        raise ValueError(f"{where}: must list at most {MAX_AUTHORIZATION_ATTRIBUTES} "
                         f"attributes (got {len(value)})")
    attributes = []
    for index, attribute in enumerate(value):
        if not isinstance(attribute, Mapping):
            raise ValueError(f"{where}[{index}]: must be an object with data_type and value")
        for key in ("data_type", "value"):
            problem = text_problem(attribute.get(key))
            if problem:
                raise ValueError(f"{where}[{index}].{key}: {problem}")
        attributes.append({"data_type": attribute["data_type"], "value": attribute["value"]})
    return attributes


def _authorization(body: Mapping[str, Any], errors: list[str]) -> dict[str, Any] | None:
    value = body.get("authorization")
    if value is None:
        return None
    if not isinstance(value, Mapping):
        errors.append("authorization: must be an object with admins and readers")
        return None
    try:
        return {section: _attributes(value.get(section), f"authorization.{section}")
                for section in AUTHORIZATION_SECTIONS}
    except ValueError as error:
        errors.append(str(error))
        return None


def parse_body(body: Any) -> SubscriptionBody:
    """The settable fields of a request body; raises SubscriptionInvalid naming every
    field of a wrong type or form."""
    if not isinstance(body, Mapping):
        raise SubscriptionInvalid(["the body must be a JSON object (a Subscription)"])
    errors: list[str] = []
    parsed = SubscriptionBody(
        owning_application=_text(body, "owning_application", errors),
        event_types=_event_types(body, errors),
        consumer_group=_text(body, "consumer_group", errors),
        read_from=_read_from(body, errors),
        initial_cursors=_initial_cursors(body, errors),
        authorization=_authorization(body, errors),
    )
    if errors:
        raise SubscriptionInvalid(errors)
    return parsed


def subscription_view(subscription: Subscription) -> dict[str, Any]:
    """The Subscription object of the API."""
    view: dict[str, Any] = {
        "id": subscription.id,
        "owning_application": subscription.owning_application,
        "event_types": list(subscription.event_types),
        "consumer_group": subscription.consumer_group,
        "read_from": subscription.read_from,
        "initial_cursors": [{"event_type": cursor.event_type, "partition": cursor.partition,
                             "offset": cursor.offset}
                            for cursor in subscription.initial_cursors],
        "created_at": rfc3339(subscription.created_at),
        "updated_at": rfc3339(subscription.updated_at),
    }
    if subscription.authorization is not None:
        view["authorization"] = subscription.authorization
    return view
