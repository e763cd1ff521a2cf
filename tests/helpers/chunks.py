"""``Lines`` as the postgres engine reads a stored chunk, with or without its line ends."""

from __future__ import annotations

from app.storage.engine import Lines, line_ends, read_line_ends


def lines(*events: bytes) -> Lines:
    """Lines as a chunk stored without line ends is read."""
    return Lines(b"\n".join(events), len(events))


def windowed(*events: bytes) -> Lines:
    """Lines as a chunk stored with its line ends is read."""
    data = b"\n".join(events)
    return Lines(data, len(events), read_line_ends(line_ends(events), data, len(events)))
