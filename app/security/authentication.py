"""Authentication: the subject of a request from its ``Authorization: Bearer`` header.

``Authenticator.subject(header)`` answers the Subject, or raises
``Unauthenticated`` (a 401) or ``AuthenticationUnavailable`` (a 503). The token
itself is never logged nor kept (the cache keys on its digest).
"""

from __future__ import annotations

import logging
import re

from app.security.subjects import Subject
from app.security.tokeninfo import (
    InvalidToken,
    TokenCache,
    TokenInfoClient,
    TokenInfoUnavailable,
)

# RFC 6750's b64token; longer tokens are refused before any lookup.
TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
MAX_TOKEN_LENGTH = 4096

log = logging.getLogger(__name__)


class Unauthenticated(Exception):
    """No usable credentials (a 401). ``error`` is RFC 6750's error code, if any."""

    def __init__(self, detail: str, error: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.error = error


class AuthenticationUnavailable(Exception):
    """The token-info service could not say who the caller is (a 503)."""


def bearer_token(header: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header."""
    if header is None or not header.strip():
        raise Unauthenticated("this endpoint needs an OAuth2 bearer token: send "
                              "'Authorization: Bearer <token>'")
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        raise Unauthenticated("the Authorization header must use the Bearer scheme: "
                              "'Authorization: Bearer <token>'", "invalid_request")
    token = token.strip()
    if len(token) > MAX_TOKEN_LENGTH:
        raise Unauthenticated(f"the bearer token is longer than {MAX_TOKEN_LENGTH} "
                              "characters", "invalid_request")
    if not TOKEN.fullmatch(token):
        raise Unauthenticated("the Authorization header must be 'Bearer <token>', the token "
                              "made of letters, digits and -._~+/ (then any '=')",
                              "invalid_request")
    return token


class Authenticator:
    """Turns bearer tokens into subjects through the cached token-info service."""

    def __init__(self, client: TokenInfoClient, cache_size: int, cache_ttl_s: float,
                 realms: dict[str, str]) -> None:
        self._client = client
        self._tokens = TokenCache(client.lookup, cache_size, cache_ttl_s)
        self._realms = realms

    def subject(self, header: str | None) -> Subject:
        token = bearer_token(header)
        try:
            info = self._tokens.get(token)
        except InvalidToken as error:
            raise Unauthenticated(f"the bearer token is not valid: {error}",
                                  "invalid_token") from None
        except TokenInfoUnavailable as error:
            log.warning("cannot authenticate: %s", error)
            raise AuthenticationUnavailable(str(error)) from None
        data_type = self._realms.get(info.realm.strip("/"))
        if data_type is None:
            raise Unauthenticated(f"tokens of the realm '{info.realm}' are not accepted here",
                                  "invalid_token")
        return Subject(data_type, info.uid, info.scopes)

    def close(self) -> None:
        self._client.close()
