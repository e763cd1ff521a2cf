"""Subjects and the attributes that authorize them (pure, no I/O)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.domain.event_type import AuthorizationAttribute

WILDCARD = "*"


@dataclass(frozen=True)
class Subject:
    """Who makes a request: ``data_type`` from the token's realm, ``value`` its uid."""

    data_type: str
    value: str
    scopes: frozenset[str] = frozenset()

    def __str__(self) -> str:
        return f"{self.data_type}:{self.value}"


def matches(attribute: AuthorizationAttribute, subject: Subject) -> bool:
    """Whether the attribute names the subject; ``*`` stands for any data type or value."""
    return (attribute.data_type in (WILDCARD, subject.data_type)
            and attribute.value in (WILDCARD, subject.value))


def any_matches(attributes: Iterable[AuthorizationAttribute], subject: Subject) -> bool:
    return any(matches(attribute, subject) for attribute in attributes)


def attributes_of(items: Iterable[Mapping[str, str]]) -> tuple[AuthorizationAttribute, ...]:
    """Attributes from their JSON form (``{"data_type": ..., "value": ...}``)."""
    return tuple(AuthorizationAttribute(item["data_type"], item["value"]) for item in items)


def parse_attribute_list(raw: str, variable: str) -> tuple[AuthorizationAttribute, ...]:
    """``user:alice,service:stups_app`` as attributes; a ValueError names ``variable``."""
    attributes = []
    for item in filter(None, (part.strip() for part in raw.split(","))):
        data_type, colon, value = item.partition(":")
        if not colon or not data_type.strip() or not value.strip():
            raise ValueError(f"{variable}: {item!r} is not data_type:value "
                             "(like user:alice or service:stups_app)")
        attributes.append(AuthorizationAttribute(data_type.strip(), value.strip()))
    return tuple(attributes)


def parse_realms(raw: str) -> dict[str, str]:
    """``/employees=user,/services=service`` as a mapping from realm to data type.
    Realms are compared without their leading slash."""
    realms = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        realm, equals, data_type = item.partition("=")
        if not equals or not realm.strip("/ ") or not data_type.strip():
            raise ValueError(f"NAKADI_OAUTH2_REALMS: {item!r} is not realm=data_type "
                             "(like /employees=user)")
        realms[realm.strip().strip("/")] = data_type.strip()
    return realms
