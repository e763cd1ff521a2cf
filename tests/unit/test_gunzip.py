"""Undoing gzip on request bodies: every member, bounded output."""

from __future__ import annotations

import gzip

import pytest

from app.api.body import GZIP_SLICE, MAX_GZIP_MEMBERS, GzipInvalid, gunzip


def test_members_and_zero_padding_between_them_are_read():
    data = gzip.compress(b"[1,") + b"\0\0\0" + gzip.compress(b"2]") + b"\0"
    assert gunzip(data, 100) == b"[1,2]"


def test_members_longer_than_a_slice_of_the_body_are_read_whole():
    first = bytes(range(256)) * (3 * GZIP_SLICE // 256)  # stored: over three slices
    second = b"the second member"
    data = gzip.compress(first, compresslevel=0) + gzip.compress(second)
    assert len(data) > 3 * GZIP_SLICE
    assert gunzip(data, 10 * GZIP_SLICE) == first + second


def test_as_many_members_as_allowed_are_read_and_more_are_refused():
    allowed = gzip.compress(b"[]") + gzip.compress(b"") * (MAX_GZIP_MEMBERS - 1)
    assert gunzip(allowed, 100) == b"[]"
    with pytest.raises(GzipInvalid, match=f"more than {MAX_GZIP_MEMBERS} members"):
        gunzip(allowed + gzip.compress(b""), 100)


def test_half_a_million_empty_members_are_refused_at_the_cap():
    """Each member used to copy the rest of the body: 10 MB of them held a worker for
    minutes. Reading stops at the cap."""
    with pytest.raises(GzipInvalid, match="members"):
        gunzip(gzip.compress(b"[]") + gzip.compress(b"") * 500_000, 100)


def test_output_stops_just_past_the_limit():
    assert len(gunzip(gzip.compress(b"x" * 10_000), 100)) == 101


@pytest.mark.parametrize("data", [
    b"not gzip",
    gzip.compress(b"[1]")[:-4],
    gzip.compress(b"[1]") + b"junk",
])
def test_broken_gzip_is_refused(data):
    with pytest.raises(GzipInvalid):
        gunzip(data, 100)
