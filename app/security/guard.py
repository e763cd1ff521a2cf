"""Security at the HTTP door: every request is authenticated before its handler
runs (when authentication is on), and handlers state what they need in one
line: ``require_event_type(event_type, Operation.WRITE)``, ``require_admin(...)``.

Statuses: 401 without valid credentials (with ``WWW-Authenticate``), 503 when
the token-info service cannot tell, 403 naming what the caller lacks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from flask import Flask, Response

from app.current import current_globals, current_request
from app.domain.event_type import AuthorizationAttribute, EventType
from app.domain.security import AdminPermission, Feature
from app.domain.subscription import Subscription
from app.domain.timeline import Timelines
from app.monitoring.kpi_event_types import KPI_EVENT_TYPES
from app.problems import Problem, problem_response
from app.security.authentication import AuthenticationUnavailable, Unauthenticated
from app.security.policy import ALLOWED, Decision, Operation, Policy
from app.security.scopes import Scope
from app.security.service import Security
from app.security.settings_cache import SettingsUnavailable
from app.security.subjects import Subject
from app.services import services

OPEN_PATHS = frozenset({"/health", "/health/live", "/openapi.json"})
STREAM_CHECK_INTERVAL_S = 1.0
SUBSCRIPTION_CHECK_INTERVAL_S = 5.0
REALM = "nakadi"

View = TypeVar("View", bound=Callable[..., object])

log = logging.getLogger(__name__)


def needs_scope(kind: Scope) -> Callable[[View], View]:
    """Declare the kind of action an endpoint is, so that the scope configured for it
    (``NAKADI_OAUTH2_<READ|WRITE|ADMIN|CONFIG>_SCOPE``, none by default) is required."""
    def declare(view: View) -> View:
        view.nakadi_scope = kind  # type: ignore[attr-defined]
        return view
    return declare


def _challenge(status: int, detail: str, error: str | None = None,
               scope: str | None = None) -> Response:
    response = problem_response(status, detail)
    parts = [f'realm="{REALM}"']
    if error:
        parts.append(f'error="{error}"')
    if scope:
        parts.append(f'scope="{scope}"')
    response.headers["WWW-Authenticate"] = "Bearer " + ", ".join(parts)
    return response


def install_authentication(app: Flask) -> None:
    @app.before_request
    def _authenticate() -> Response | None:
        context, asked = current_globals(), current_request()
        context.subject = None
        security: Security = services().security
        # The route, however the path was spelled ("/health/"); without one (a method the
        # route does not take) the path, so that its answer is the 405, as with a token.
        rule = asked.url_rule
        path = rule.rule if rule is not None else asked.path.rstrip("/")
        if security.authenticator is None or path in OPEN_PATHS:
            return None
        try:
            subject = security.authenticator.subject(asked.headers.get("Authorization"))
        except Unauthenticated as refused:
            return _challenge(401, refused.detail, refused.error)
        except AuthenticationUnavailable as error:
            return problem_response(503, f"Authentication is unavailable: {error}; "
                                         "try again later.")
        context.subject = subject
        view = app.view_functions.get(asked.endpoint or "")
        kind = getattr(view, "nakadi_scope", None)
        scope = security.scopes.get(kind) if kind is not None else None
        if scope and scope not in subject.scopes:
            return _challenge(403, f"the token lacks the scope '{scope}' that this "
                                   "endpoint needs", "insufficient_scope", scope)
        return None


def current_subject() -> Subject | None:
    """Who makes the request; None while authentication is off."""
    subject: Subject | None = current_globals().get("subject")
    return subject


def current_policy() -> Policy:
    """The rules for this request's subject, under one reading of the settings."""
    context = current_globals()
    policy: Policy | None = context.get("policy")
    if policy is None:
        try:
            policy = services().security.policy(current_subject())
        except SettingsUnavailable as error:
            log.error("security settings unavailable: %s", error)
            raise Problem(503, "The security settings cannot be read; try again later."
                          ) from None
        context.policy = policy
    return policy


def _enforce(decision: Decision) -> None:
    if not decision:
        raise Problem(403, decision.reason)


def require_event_type(event_type: EventType, operation: Operation) -> None:
    """403 unless the caller may do ``operation`` to the event type; writing also
    needs the producer not to be blacklisted."""
    policy = current_policy()
    _enforce(policy.event_type(event_type.name, event_type.authorization, operation))
    if operation is Operation.WRITE:
        _enforce(policy.may_publish(event_type.name))


def _reading(policy: Policy, event_types: Sequence[EventType]) -> Decision:
    """Whether the caller reads every one of the event types (the first refusal)."""
    for event_type in event_types:
        decision = policy.event_type(event_type.name, event_type.authorization,
                                     Operation.READ)
        if not decision:
            return decision
    return ALLOWED


def _event_types_of(subscription: Subscription) -> list[EventType]:
    """The subscription's event types that still exist."""
    event_types = services().event_types
    found = [event_types.get(name) for name in subscription.event_types]
    return [entry[0] for entry in found if entry is not None]


def require_consumer(event_types: Sequence[EventType]) -> None:
    """403 unless the caller may open a stream of all these event types: a reader of
    each, and not blacklisted as their consumer."""
    policy = current_policy()
    _enforce(_reading(policy, event_types))
    _enforce(policy.may_consume([event_type.name for event_type in event_types]))


def require_subscription(subscription: Subscription, operation: Operation) -> None:
    """403 unless the caller may do ``operation`` (READ: view it; ADMIN: change it)."""
    _enforce(current_policy().subscription(subscription.id, subscription.authorization,
                                           operation))


def subscription_viewing(subscription: Subscription) -> Decision:
    """Whether the caller may see the subscription's committed cursors and stats: a
    reader of it and of every event type it reads, since they tell the event types'
    offsets and counts. A consumer the blacklist blocks may still look: looking
    consumes nothing."""
    policy = current_policy()
    decision = policy.subscription(subscription.id, subscription.authorization,
                                   Operation.READ)
    return _reading(policy, _event_types_of(subscription)) if decision else decision


def require_subscription_viewer(subscription: Subscription) -> None:
    """403 unless ``subscription_viewing`` allows it."""
    _enforce(subscription_viewing(subscription))


def require_subscription_reader(subscription: Subscription) -> None:
    """403 unless the caller may stream and commit: a reader of the subscription and of
    every event type it reads, and not blacklisted as their consumer."""
    require_subscription(subscription, Operation.READ)
    require_consumer_of_event_types(subscription)


def require_consumer_of_event_types(subscription: Subscription) -> None:
    """403 unless the caller may read every event type the subscription reads (and is
    not blacklisted as their consumer)."""
    require_consumer(_event_types_of(subscription))


def require_admin(permission: AdminPermission) -> None:
    """403 unless the caller is a Nakadi administrator with that permission."""
    _enforce(current_policy().admin(permission))


def require_admin_for_kpi_names(name: str) -> None:
    """403 for creating, changing or deleting one of the broker's KPI event types,
    unless the caller is a Nakadi administrator (``writers``): the broker publishes
    every tenant's use into whichever event type has the name, so anyone who created it
    first, or changed its readers, read all of it alone."""
    if name in KPI_EVENT_TYPES and not current_policy().is_admin(AdminPermission.WRITE):
        raise Problem(403, f"'{name}' is one of the broker's KPI event types: only Nakadi "
                           "administrators may create, change or delete it")


def require_feature_off(feature: Feature, detail: str) -> None:
    """503 with ``detail`` while the feature toggle is on."""
    if current_policy().settings.is_enabled(feature):
        raise Problem(503, detail)


def feature_enabled(feature: Feature) -> bool:
    return current_policy().settings.is_enabled(feature)


Refusal = Callable[[], str | None]
"""Asked while a stream runs: why it must end now, or None while its reader may go on."""


def _at_most_every(interval_s: float, check: Refusal) -> Refusal:
    """``check``, asked again only once ``interval_s`` passed since it was last asked;
    once it gives a reason it keeps giving it."""
    asked_at, reason = float("-inf"), None

    def throttled() -> str | None:
        nonlocal asked_at, reason
        now = time.monotonic()
        if reason is None and now - asked_at >= interval_s:
            asked_at, reason = now, check()
        return reason
    return throttled


def consumer_still_allowed(event_types: Sequence[str]) -> Callable[[], bool]:
    """For an open stream, checked while it runs (at most every STREAM_CHECK_INTERVAL_S):
    whether its event types all still exist, with the readers they had when it opened,
    and the caller still reads them without being blacklisted. It runs outside the
    request, so it keeps what it needs of it."""
    refusal = _at_most_every(STREAM_CHECK_INTERVAL_S, _consumer_refusal(event_types))
    return lambda: refusal() is None


def subscription_reader_refusal(subscription: Subscription) -> Refusal:
    """``consumer_still_allowed`` for a subscription stream, saying why it ends; its reader
    must also stay one of the subscription's readers (from the subscription cache, which
    hears of every change of its authorization, every SUBSCRIPTION_CHECK_INTERVAL_S)."""
    current, subject = services(), current_subject()
    consumer = _consumer_refusal(subscription.event_types)

    def subscription_reader() -> str | None:
        stored = current.subscriptions.get(subscription.id)
        if stored is None:
            return None  # a deleted subscription ends its streams by itself
        decision = current.security.policy(subject).subscription(
            stored.id, stored.authorization, Operation.READ)
        if decision:
            return None
        log.info("closing a stream of subscription %s: %s", stored.id, decision.reason)
        return "the reader is no longer allowed to read this subscription"

    reader = _at_most_every(SUBSCRIPTION_CHECK_INTERVAL_S, subscription_reader)
    return _at_most_every(STREAM_CHECK_INTERVAL_S, lambda: consumer() or reader())


def _readers(entry: tuple[EventType, Timelines] | None
             ) -> tuple[AuthorizationAttribute, ...] | None:
    authorization = entry[0].authorization if entry is not None else None
    return authorization.readers if authorization is not None else None


def _consumer_refusal(event_types: Sequence[str]) -> Refusal:
    current, subject = services(), current_subject()
    # The spec: "If the update changes the list of readers, then all consumers will be
    # disconnected"; they reconnect if they still may.
    opened_with = {name: _readers(current.event_types.get(name)) for name in event_types}

    def refusal() -> str | None:
        found = {name: current.event_types.get(name) for name in event_types}
        gone = next((name for name, entry in found.items() if entry is None), None)
        if gone is not None:
            return f"the event type {gone} was deleted"
        changed = next((name for name, entry in found.items()
                        if _readers(entry) != opened_with[name]), None)
        if changed is not None:
            log.info("closing the stream of %s: the readers of %s changed",
                     ", ".join(event_types), changed)
            return f"the readers of the event type {changed} changed: reconnect"
        try:
            policy = current.security.policy(subject)
        except SettingsUnavailable:
            return None  # nothing was ever read: keep the rights the stream opened with
        decisions = [policy.event_type(entry[0].name, entry[0].authorization, Operation.READ)
                     for entry in found.values() if entry is not None]
        decisions.append(policy.may_consume(event_types))
        refused = next((decision for decision in decisions if not decision), None)
        if refused is None:
            return None
        log.info("closing the stream of %s: %s", ", ".join(event_types), refused.reason)
        return "the reader is no longer allowed to read its event types"
    return refusal
