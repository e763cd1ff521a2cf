"""Reading and showing the bodies of ``/settings/admins`` and ``/settings/features``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.domain.event_type import MAX_AUTHORIZATION_ATTRIBUTES, AuthorizationAttribute
from app.domain.security import AdminAuthorization, AdminPermission, Feature

MAX_TEXT = 255


class SettingsInvalid(Exception):
    """A settings body that cannot be applied (a 422 with ``detail``)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _attribute(item: Any, where: str) -> AuthorizationAttribute:
    if not isinstance(item, Mapping):
        raise SettingsInvalid(f"{where}: must be an object with data_type and value")
    values = []
    for key in ("data_type", "value"):
        value = item.get(key)
        if not isinstance(value, str) or not value.strip():
            raise SettingsInvalid(f"{where}.{key}: must be a non-empty string")
        if len(value) > MAX_TEXT:
            raise SettingsInvalid(f"{where}.{key}: must be at most {MAX_TEXT} characters")
        values.append(value)
    return AuthorizationAttribute(*values)


def parse_admin_authorization(body: Any) -> AdminAuthorization:
    """An AdminAuthorization body; every list must name at least one attribute, so that
    Nakadi is never left without administrators."""
    if not isinstance(body, Mapping):
        raise SettingsInvalid("the body must be an object with admins, readers and writers")
    lists = {}
    for permission in AdminPermission:
        name = permission.value
        items = body.get(name)
        if not isinstance(items, list) or not items:
            raise SettingsInvalid(f"{name}: must be a non-empty array of attributes; "
                                  "Nakadi must keep at least one administrator in each list")
        if len(items) > MAX_AUTHORIZATION_ATTRIBUTES:
            raise SettingsInvalid(f"{name}: must list at most {MAX_AUTHORIZATION_ATTRIBUTES} "
                                  f"attributes (got {len(items)})")
        # Kept as stored: without duplicates, in order of data type and value.
        lists[name] = tuple(sorted({_attribute(item, f"{name}[{index}]")
                                    for index, item in enumerate(items)},
                                   key=lambda attribute: (attribute.data_type,
                                                          attribute.value)))
    return AdminAuthorization(**lists)


def admin_authorization_view(admins: AdminAuthorization) -> dict[str, list[dict[str, str]]]:
    return {permission.value: [{"data_type": attribute.data_type, "value": attribute.value}
                               for attribute in admins.attributes(permission)]
            for permission in AdminPermission}


def parse_feature(body: Any) -> tuple[Feature, bool]:
    """A Feature body: ``{"feature": <name>, "enabled": <boolean>}``."""
    if not isinstance(body, Mapping):
        raise SettingsInvalid("the body must be an object with feature and enabled")
    name, enabled = body.get("feature"), body.get("enabled")
    known = ", ".join(feature.value for feature in Feature)
    if not isinstance(name, str):
        raise SettingsInvalid(f"feature: must be a string, one of {known}")
    try:
        feature = Feature(name.lower())
    except ValueError:
        raise SettingsInvalid(f"feature: '{name}' is not a feature; features are {known}"
                              ) from None
    if not isinstance(enabled, bool):
        raise SettingsInvalid("enabled: must be true or false")
    return feature, enabled
