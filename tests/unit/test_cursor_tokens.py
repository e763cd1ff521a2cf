"""Cursor tokens are random version-4 UUIDs, as Nakadi's are; clients may parse them."""

from __future__ import annotations

import uuid

from app.subscriptions.cursors import cursor_tokens, new_cursor_token


def test_tokens_are_distinct_version_4_uuids_in_canonical_form():
    tokens = [new_cursor_token() for _ in range(2000)]
    assert len(set(tokens)) == len(tokens)
    for token in tokens:
        parsed = uuid.UUID(token)
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
        assert str(parsed) == token


def test_a_streams_tokens_are_distinct_version_4_uuids_and_other_streams_differ():
    first, second = cursor_tokens(), cursor_tokens()
    tokens = [next(first) for _ in range(2000)]
    assert len(set(tokens)) == len(tokens)
    for token in tokens:
        parsed = uuid.UUID(token)
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
        assert str(parsed) == token
    assert next(second)[:24] != tokens[0][:24]
