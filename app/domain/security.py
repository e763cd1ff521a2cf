"""The installation-wide security settings: Nakadi's administrators, the blacklist
and the feature toggles (the spec's AdminAuthorization, blacklist and Feature)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from app.domain.event_type import AuthorizationAttribute


class AdminPermission(Enum):
    """The three lists of AdminAuthorization: ``admin`` changes the admin lists, ``read``
    reads admin endpoints (and everything else), ``write`` writes them (and everything
    else)."""

    ADMIN = "admins"
    READ = "readers"
    WRITE = "writers"


@dataclass(frozen=True)
class AdminAuthorization:
    admins: tuple[AuthorizationAttribute, ...]
    readers: tuple[AuthorizationAttribute, ...]
    writers: tuple[AuthorizationAttribute, ...]

    def attributes(self, permission: AdminPermission) -> tuple[AuthorizationAttribute, ...]:
        result: tuple[AuthorizationAttribute, ...] = getattr(self, permission.value)
        return result


class BlacklistType(Enum):
    """Who or what is blocked: consumers or producers, by application (the token's uid)
    or by event type."""

    CONSUMER_APP = "CONSUMER_APP"
    CONSUMER_ET = "CONSUMER_ET"
    PRODUCER_APP = "PRODUCER_APP"
    PRODUCER_ET = "PRODUCER_ET"


class Feature(Enum):
    """Feature toggles, all off unless enabled through ``/settings/features``."""

    DISABLE_EVENT_TYPE_CREATION = "disable_event_type_creation"
    DISABLE_EVENT_TYPE_DELETION = "disable_event_type_deletion"
    DISABLE_SUBSCRIPTION_CREATION = "disable_subscription_creation"
    DELETE_EVENT_TYPE_WITH_SUBSCRIPTIONS = "delete_event_type_with_subscriptions"
    KPI_COLLECTION = "kpi_collection"  # the broker publishes KPI events (app/monitoring)


@dataclass(frozen=True)
class SecuritySettings:
    """One consistent reading of the settings. ``admins`` is None while nobody set them
    through the API: then ``NAKADI_ADMINS`` applies."""

    admins: AdminAuthorization | None = None
    blacklist: frozenset[tuple[BlacklistType, str]] = frozenset()
    enabled_features: frozenset[Feature] = field(default_factory=frozenset)

    def is_blocked(self, kind: BlacklistType, name: str) -> bool:
        return (kind, name) in self.blacklist

    def is_enabled(self, feature: Feature) -> bool:
        return feature in self.enabled_features
