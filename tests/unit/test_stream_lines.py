"""A stream writes the lines of a turn together: chunks of short lines, long lines alone."""

from __future__ import annotations

from app.streaming.lines import JOIN_BYTES, joined


def test_short_lines_go_out_together_in_order_up_to_the_chunk_size():
    lines = [b"%d\n" % n + b"x" * 1000 for n in range(600)]
    chunks = list(joined(lines[:10], iter(lines[10:])))
    assert b"".join(chunks) == b"".join(lines)
    assert len(chunks) == 3  # ~600 KB in chunks of up to 256 KiB
    assert all(len(chunk) <= JOIN_BYTES for chunk in chunks)


def test_a_line_longer_than_a_chunk_goes_alone_uncopied():
    long = b"y" * (JOIN_BYTES + 1)
    chunks = list(joined([b"a\n"], [long, b"b\n"]))
    assert chunks == [b"a\n", long, b"b\n"]
    assert chunks[1] is long


def test_no_lines_no_chunk():
    assert list(joined([], iter(()))) == []
