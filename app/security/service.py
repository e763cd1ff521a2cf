"""The security of one worker process: its authenticator (None while authentication
is off), the configured administrators and scopes, and the shared settings."""

from __future__ import annotations

from app.config import Settings
from app.domain.security import AdminAuthorization
from app.repository.database import ConnectionPool
from app.security.authentication import Authenticator
from app.security.policy import Policy
from app.security.scopes import configured_scopes
from app.security.settings_cache import SecuritySettingsCache
from app.security.subjects import Subject, parse_attribute_list, parse_realms
from app.security.tokeninfo import TokenInfoClient


class Security:
    def __init__(self, settings: Settings, pool: ConnectionPool) -> None:
        admins = parse_attribute_list(settings.admins, "NAKADI_ADMINS")
        self.configured_admins = AdminAuthorization(admins, admins, admins)
        self.scopes = configured_scopes(settings)
        self.authenticator: Authenticator | None = None
        if settings.oauth2_tokeninfo_url:
            self.authenticator = Authenticator(
                TokenInfoClient(settings.oauth2_tokeninfo_url,
                                settings.oauth2_tokeninfo_timeout_s),
                settings.oauth2_cache_size, settings.oauth2_cache_ttl_s,
                parse_realms(settings.oauth2_realms))
        self.settings = SecuritySettingsCache(pool)

    @property
    def enabled(self) -> bool:
        return self.authenticator is not None

    def policy(self, subject: Subject | None) -> Policy:
        """The rules for the subject under the current settings."""
        return Policy(subject, self.settings.current(), self.configured_admins)

    def close(self) -> None:
        self.settings.close()
        if self.authenticator is not None:
            self.authenticator.close()
