"""The token-info client and its cache, with the service mocked by ``responses``."""

from __future__ import annotations

import gevent
import pytest
import requests
import responses

from app.security.authentication import (
    MAX_TOKEN_LENGTH,
    AuthenticationUnavailable,
    Authenticator,
    Unauthenticated,
    bearer_token,
)
from app.security.subjects import Subject, parse_realms
from app.security.tokeninfo import (
    InvalidToken,
    TokenCache,
    TokenInfo,
    TokenInfoClient,
    TokenInfoUnavailable,
)
from tests.helpers.clock import Clock

URL = "https://auth.example.com/oauth2/tokeninfo"
REALMS = parse_realms("/employees=user,/services=service")


def answer(status: int = 200, **body) -> None:
    responses.add(responses.GET, URL, status=status,
                  json={"uid": "alice", "realm": "/employees", "scope": ["uid", "read"],
                        "expires_in": 3600, **body})


@responses.activate
def test_a_valid_token_gives_its_subject_and_the_token_goes_in_a_header():
    answer()
    subject = Authenticator(TokenInfoClient(URL, 1), 10, 60, REALMS).subject("Bearer s3cr3t")
    assert subject == Subject("user", "alice", frozenset({"uid", "read"}))
    assert responses.calls[0].request.headers["Authorization"] == "Bearer s3cr3t"
    assert "s3cr3t" not in responses.calls[0].request.url


@responses.activate
def test_the_realm_gives_the_data_type():
    answer(realm="services", uid="stups_app")
    subject = Authenticator(TokenInfoClient(URL, 1), 10, 60, REALMS).subject("Bearer tok")
    assert (subject.data_type, subject.value) == ("service", "stups_app")


@responses.activate
def test_an_unknown_realm_is_refused():
    answer(realm="/robots")
    with pytest.raises(Unauthenticated, match="realm '/robots'"):
        Authenticator(TokenInfoClient(URL, 1), 10, 60, REALMS).subject("Bearer tok")


@responses.activate
@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_refused_tokens_are_invalid(status):
    responses.add(responses.GET, URL, status=status, json={"error": "invalid_token"})
    with pytest.raises(InvalidToken):
        TokenInfoClient(URL, 1).lookup("tok")


@responses.activate
def test_an_expired_token_is_invalid():
    answer(expires_in=0)
    with pytest.raises(InvalidToken, match="expired"):
        TokenInfoClient(URL, 1).lookup("tok")


@responses.activate
@pytest.mark.parametrize("reply", [
    {"status": 500, "body": "oops"},
    {"status": 429, "body": "slow down"},
    {"status": 200, "body": "<html>not json</html>"},
    {"status": 200, "body": ""},
    {"status": 200, "json": ["a", "list"]},
    {"status": 200, "json": {"realm": "/employees"}},
    {"status": 200, "json": {"uid": "a", "scope": [1, 2]}},
    {"status": 200, "json": {"uid": "a", "expires_in": "soon"}},
    {"status": 200, "json": {"uid": "a", "realm": 7}},
    {"body": requests.ConnectTimeout("took too long")},
    {"body": requests.ConnectionError("refused")},
])
def test_a_service_that_cannot_tell_is_unavailable(reply):
    responses.add(responses.GET, URL, **reply)
    with pytest.raises(TokenInfoUnavailable):
        TokenInfoClient(URL, 1).lookup("tok")


@responses.activate
def test_unavailable_token_info_is_a_503_for_the_authenticator():
    responses.add(responses.GET, URL, status=503)
    with pytest.raises(AuthenticationUnavailable):
        Authenticator(TokenInfoClient(URL, 1), 10, 60, REALMS).subject("Bearer tok")


@responses.activate
def test_a_space_separated_scope_string_is_accepted():
    answer(scope="uid read write")
    assert TokenInfoClient(URL, 1).lookup("tok").scopes == {"uid", "read", "write"}


@pytest.mark.parametrize("header", [
    None, "", "   ", "Basic abc", "Bearer", "Bearer a b", "Bearer tök", 'Bearer "t"',
    "Bearer " + "a" * (MAX_TOKEN_LENGTH + 1), "Bearer =abc",
])
def test_malformed_headers_are_unauthenticated(header):
    with pytest.raises(Unauthenticated):
        bearer_token(header)


@pytest.mark.parametrize(("header", "token"), [
    ("Bearer abc.DEF-123_~+/==", "abc.DEF-123_~+/=="), ("bearer  xyz ", "xyz"),
    ("Bearer " + "a" * MAX_TOKEN_LENGTH, "a" * MAX_TOKEN_LENGTH),
])
def test_well_formed_headers_give_the_token(header, token):
    assert bearer_token(header) == token


def counting_lookup(expires_in: float | None = 3600):
    calls: list[str] = []

    def lookup(token: str) -> TokenInfo:
        calls.append(token)
        return TokenInfo(token, "/employees", frozenset(), expires_in)
    return lookup, calls


def test_the_cache_answers_until_its_ttl():
    lookup, calls = counting_lookup()
    clock = Clock(1000.0)
    cache = TokenCache(lookup, 10, ttl_s=60, clock=clock)
    assert cache.get("a").uid == "a" and cache.get("a").uid == "a"
    assert calls == ["a"]
    clock.now += 59.9
    cache.get("a")
    assert calls == ["a"]
    clock.now += 0.2
    cache.get("a")
    assert calls == ["a", "a"]


def test_the_cache_never_keeps_a_token_past_its_expires_in():
    lookup, calls = counting_lookup(expires_in=5)
    clock = Clock(1000.0)
    cache = TokenCache(lookup, 10, ttl_s=60, clock=clock)
    cache.get("a")
    clock.now += 5
    cache.get("a")
    assert calls == ["a", "a"]


def test_tokens_without_expires_in_are_not_cached():
    lookup, calls = counting_lookup(expires_in=None)
    cache = TokenCache(lookup, 10, ttl_s=60)
    cache.get("a")
    cache.get("a")
    assert calls == ["a", "a"]


def test_the_cache_is_bounded_and_drops_the_least_recently_used():
    lookup, calls = counting_lookup()
    cache = TokenCache(lookup, 2, ttl_s=60)
    cache.get("a")
    cache.get("b")
    cache.get("a")  # b is now the least recently used
    cache.get("c")
    assert len(cache) == 2
    cache.get("a")
    cache.get("b")
    assert calls == ["a", "b", "c", "b"]


def test_refusals_are_not_cached():
    calls: list[str] = []

    def refuse(token: str) -> TokenInfo:
        calls.append(token)
        raise InvalidToken("no")

    cache = TokenCache(refuse, 10, ttl_s=60)
    for _ in range(2):
        with pytest.raises(InvalidToken):
            cache.get("a")
    assert calls == ["a", "a"]


@responses.activate
def test_a_service_slower_than_the_timeout_is_unavailable():
    def slow(request):
        gevent.sleep(1)
        return 200, {}, '{"uid": "alice", "expires_in": 60}'

    responses.add_callback(responses.GET, URL, callback=slow)
    with pytest.raises(TokenInfoUnavailable, match=r"did not answer within 0\.05 s"):
        TokenInfoClient(URL, 0.05).lookup("tok")


def test_concurrent_misses_of_one_token_share_one_lookup():
    calls: list[str] = []

    def slow_lookup(token: str) -> TokenInfo:
        calls.append(token)
        gevent.sleep(0.05)
        return TokenInfo(token, "/employees", frozenset(), 3600)

    cache = TokenCache(slow_lookup, 10, ttl_s=60)
    greenlets = [gevent.spawn(cache.get, "a") for _ in range(5)]
    gevent.joinall(greenlets, raise_error=True)
    assert [greenlet.value.uid for greenlet in greenlets] == ["a"] * 5
    assert calls == ["a"]
