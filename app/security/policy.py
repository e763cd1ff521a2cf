"""Who may do what: the authorization rules, pure functions of a subject, the
resource's authorization section and the security settings (no I/O).

A subject of ``None`` means authentication is off: every right. A resource
without an authorization section is open to every subject (Nakadi's legacy
behaviour). Nakadi administrators are authorized for everything: the admin
``readers`` for reading, the admin ``writers`` for writing and administering
resources, the admin ``admins`` for changing the admin lists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from app.domain.event_type import AuthorizationAttribute, EventTypeAuthorization
from app.domain.security import AdminAuthorization, AdminPermission, BlacklistType
from app.domain.security import SecuritySettings as StoredSettings
from app.security.subjects import Subject, any_matches, attributes_of


class Operation(Enum):
    """What a subject wants to do with a resource, named as its authorization list."""

    READ = "readers"
    WRITE = "writers"
    ADMIN = "admins"

    @property
    def verb(self) -> str:
        return {"readers": "read", "writers": "write to", "admins": "administer"}[self.value]

    @property
    def admin_permission(self) -> AdminPermission:
        """The list of Nakadi administrators that may do this to any resource."""
        return AdminPermission.READ if self is Operation.READ else AdminPermission.WRITE


@dataclass(frozen=True)
class Decision:
    """Whether a request is allowed; when not, why (for the 403's detail)."""

    allowed: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.allowed


ALLOWED = Decision(True)


@dataclass(frozen=True)
class Policy:
    """The rules applied to one subject under one reading of the settings."""

    subject: Subject | None
    settings: StoredSettings
    configured_admins: AdminAuthorization

    @property
    def admins(self) -> AdminAuthorization:
        """The admin lists: as set through the API, or from NAKADI_ADMINS until then."""
        return self.settings.admins or self.configured_admins

    def is_admin(self, permission: AdminPermission) -> bool:
        return self.subject is None or any_matches(self.admins.attributes(permission),
                                                   self.subject)

    def admin(self, permission: AdminPermission) -> Decision:
        if self.is_admin(permission):
            return ALLOWED
        return Decision(False, f"{self.subject} is not one of Nakadi's administrators "
                               f"({permission.value})")

    def _resource(self, attributes: Sequence[AuthorizationAttribute] | None,
                  operation: Operation, resource: str) -> Decision:
        if (self.subject is None or attributes is None
                or self.is_admin(operation.admin_permission)
                or any_matches(attributes, self.subject)):
            return ALLOWED
        return Decision(False, f"{self.subject} may not {operation.verb} {resource}: it is "
                               f"not one of its {operation.value}")

    def event_type(self, name: str, authorization: EventTypeAuthorization | None,
                   operation: Operation) -> Decision:
        attributes = None if authorization is None else getattr(authorization,
                                                                operation.value)
        return self._resource(attributes, operation, f"EventType '{name}'")

    def subscription(self, subscription_id: str, authorization: Mapping[str, Any] | None,
                     operation: Operation) -> Decision:
        """Subscriptions have ``admins`` and ``readers`` only."""
        attributes = None
        if authorization is not None:
            attributes = attributes_of(authorization.get(operation.value) or ())
        return self._resource(attributes, operation, f"Subscription '{subscription_id}'")

    def may_consume(self, event_types: Sequence[str]) -> Decision:
        """Whether the blacklist keeps the subject from consuming these event types."""
        return self._blocked(BlacklistType.CONSUMER_APP, BlacklistType.CONSUMER_ET,
                             "consuming", event_types)

    def may_publish(self, event_type: str) -> Decision:
        """Whether the blacklist keeps the subject from publishing to the event type."""
        return self._blocked(BlacklistType.PRODUCER_APP, BlacklistType.PRODUCER_ET,
                             "publishing", (event_type,))

    def _blocked(self, by_app: BlacklistType, by_event_type: BlacklistType, role: str,
                 event_types: Sequence[str]) -> Decision:
        if self.subject is not None and self.settings.is_blocked(by_app, self.subject.value):
            return Decision(False, f"the application '{self.subject.value}' is blocked from "
                                   f"{role}")
        for name in event_types:
            if self.settings.is_blocked(by_event_type, name):
                return Decision(False, f"{role} EventType '{name}' is blocked")
        return ALLOWED
