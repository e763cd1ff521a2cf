"""The OAuth2 token-info service (Zalando/Spring "tokeninfo" style): who a bearer
token belongs to, cached for a bounded time and never past its ``expires_in``.

Outcomes are three: the token's ``TokenInfo``; ``InvalidToken`` when the service
refuses the token (a 401 for the caller); ``TokenInfoUnavailable`` when the
service is down, slow or answers something unreadable (a 503, never "allowed").

``requests`` is imported when a client is made, in a gunicorn worker after gevent
patched ``ssl``, never when this module is: the gunicorn master imports the whole
application before its workers patch, and urllib3 keeps the ``ssl`` classes it
found at import. Unpatched ones fail every HTTPS call of a patched worker with a
RecursionError (gevent issue 1016), so a token-info service behind HTTPS answered
every authenticated request with a 500.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gevent
import gevent.event

log = logging.getLogger(__name__)

# Token-info answers 4xx for tokens it does not know or that expired; other
# statuses mean it could not tell.
REFUSED_STATUSES = frozenset({400, 401, 403, 404})


class InvalidToken(Exception):
    """The token-info service says the token is not valid (now)."""


class TokenInfoUnavailable(Exception):
    """The token-info service could not tell whether the token is valid."""


@dataclass(frozen=True)
class TokenInfo:
    uid: str
    realm: str
    scopes: frozenset[str]
    expires_in: float | None  # seconds; None when the service did not say


def parse_token_info(body: Any) -> TokenInfo:
    """A token-info answer; ``TokenInfoUnavailable`` when it is not one, ``InvalidToken``
    when it says the token has expired."""
    if not isinstance(body, dict):
        raise TokenInfoUnavailable("the token-info service answered something other than "
                                   "a JSON object")
    uid, realm, scope = body.get("uid"), body.get("realm", ""), body.get("scope", [])
    expires_in = body.get("expires_in")
    if not isinstance(uid, str) or not uid.strip():
        raise TokenInfoUnavailable("the token-info answer has no uid")
    if not isinstance(realm, str):
        raise TokenInfoUnavailable("the token-info answer's realm is not a string")
    if isinstance(scope, str):  # some services send one space-separated string
        scope = scope.split()
    if not isinstance(scope, list) or not all(isinstance(item, str) for item in scope):
        raise TokenInfoUnavailable("the token-info answer's scope is not a list of strings")
    if expires_in is not None and (isinstance(expires_in, bool)
                                   or not isinstance(expires_in, int | float)):
        raise TokenInfoUnavailable("the token-info answer's expires_in is not a number")
    if expires_in is not None and expires_in <= 0:
        raise InvalidToken("the token has expired")
    return TokenInfo(uid.strip(), realm.strip(), frozenset(scope), expires_in)


class TokenInfoClient:
    """Asks the token-info service about one token at a time, within ``timeout_s``."""

    def __init__(self, url: str, timeout_s: float) -> None:
        import requests  # here, not above: see the module's docstring

        self._url = url
        self._timeout_s = timeout_s
        self._session = requests.Session()
        self._failure = requests.RequestException

    def lookup(self, token: str) -> TokenInfo:
        # The overall bound also covers a service that trickles its answer.
        timeout = gevent.Timeout(self._timeout_s, TokenInfoUnavailable(
            f"the token-info service did not answer within {self._timeout_s} s"))
        try:
            with timeout:
                response = self._session.get(
                    self._url, headers={"Authorization": f"Bearer {token}"},
                    timeout=self._timeout_s)
                body = response.content
        except self._failure as error:
            log.warning("token-info request failed: %s", type(error).__name__)
            raise TokenInfoUnavailable("the token-info service cannot be reached") from None
        if response.status_code in REFUSED_STATUSES:
            raise InvalidToken("the token-info service does not accept the token")
        if response.status_code != 200:
            raise TokenInfoUnavailable(
                f"the token-info service answered {response.status_code}")
        try:
            parsed = response.json() if body else None
        except ValueError:
            parsed = None
        return parse_token_info(parsed)

    def close(self) -> None:
        self._session.close()


class TokenCache:
    """Token-info answers by token digest: at most ``max_size`` of them (least recently
    used go first), each for ``ttl_s`` or until its ``expires_in``, whichever is sooner.
    Refusals and failures are not cached. Concurrent requests with the same token
    that the cache cannot answer share one lookup."""

    def __init__(self, lookup: Callable[[str], TokenInfo], max_size: int, ttl_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lookup = lookup
        self._max_size = max_size
        self._ttl_s = ttl_s
        self._clock = clock
        self._entries: OrderedDict[bytes, tuple[TokenInfo, float]] = OrderedDict()
        self._in_flight: dict[bytes, gevent.event.AsyncResult[TokenInfo]] = {}

    def get(self, token: str) -> TokenInfo:
        key = hashlib.sha256(token.encode()).digest()  # no token is kept in memory
        now = self._clock()
        entry = self._entries.get(key)
        if entry is not None:
            info, until = entry
            if now < until:
                self._entries.move_to_end(key)
                return info
            del self._entries[key]
        waiting = self._in_flight.get(key)
        if waiting is not None:  # one lookup per token at a time; the others share it
            shared = waiting.get()
            assert shared is not None  # set() always gets a TokenInfo
            return shared
        result: gevent.event.AsyncResult[TokenInfo] = gevent.event.AsyncResult()
        self._in_flight[key] = result
        try:
            info = self._lookup(token)
        except BaseException as error:
            result.set_exception(error)
            raise
        finally:
            del self._in_flight[key]
        result.set(info)
        lifetime = min(self._ttl_s, info.expires_in if info.expires_in is not None else 0.0)
        if lifetime > 0 and self._max_size > 0:
            self._entries[key] = (info, now + lifetime)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_size:
                self._entries.popitem(last=False)
        return info

    def __len__(self) -> int:
        return len(self._entries)
