"""Undoing gzip on request bodies: every member, bounded output."""

from __future__ import annotations

import gzip

import pytest

from app.api.body import GzipInvalid, gunzip


def test_members_and_zero_padding_between_them_are_read():
    data = gzip.compress(b"[1,") + b"\0\0\0" + gzip.compress(b"2]") + b"\0"
    assert gunzip(data, 100) == b"[1,2]"


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
