"""The kinds of action an endpoint can be, each with the OAuth2 scope a deployment
may ask of a token for it (001's security definitions)."""

from __future__ import annotations

from enum import Enum

from app.config import Settings


class Scope(Enum):
    """Named by the scope 001 gives each kind; a deployment configures the one asked."""

    READ = "nakadi.event_stream.read"
    WRITE = "nakadi.event_stream.write"
    EVENT_TYPES = "nakadi.event_type.write"  # creating and changing event types
    CONFIG = "nakadi.config.write"  # deleting event types; settings, storages, timelines


def configured_scopes(settings: Settings) -> dict[Scope, str]:
    """The scope each kind of action needs; empty: none. Changing the configuration
    asks the admin scope while no config scope of its own is set, as it did before
    there was one."""
    admin = settings.oauth2_admin_scope.strip()
    return {Scope.READ: settings.oauth2_read_scope.strip(),
            Scope.WRITE: settings.oauth2_write_scope.strip(),
            Scope.EVENT_TYPES: admin,
            Scope.CONFIG: settings.oauth2_config_scope.strip() or admin}
