"""The opaque offset strings clients see, and the engine offsets they stand for.

An offset carries its timeline and the engine offset within that timeline's
topic: ``001-0001-000000000000000042`` is format version 1, timeline 1,
engine offset 42. The fixed widths keep the strings ordered as the events are,
across timelines too. The position before a timeline's first event is engine
offset -1, written ``001-0001--1``; ``-`` sorts before every digit, so it
stays first.
"""

from __future__ import annotations

import re

FORMAT_VERSION = 1
_VERSION_PREFIX = f"{FORMAT_VERSION:03d}-"
MAX_TIMELINE = 9999
OFFSET_PATTERN = re.compile(r"([0-9]{3})-([0-9]{4})-([0-9]{18}|-1)")


class InvalidOffset(ValueError):
    """The string is not an offset this broker issues."""


def encode_offset(timeline: int, offset: int) -> str:
    """The client-facing string for an engine offset (>= -1) in a timeline (1..9999)."""
    if not 1 <= timeline <= MAX_TIMELINE or offset < -1:
        raise ValueError(f"no offset string for timeline {timeline}, offset {offset}")
    if offset == -1:
        return f"{_VERSION_PREFIX}{timeline:04d}--1"
    return f"{_VERSION_PREFIX}{timeline:04d}-{offset:018d}"  # once per line of a stream


def decode_offset(text: str) -> tuple[int, int]:
    """(timeline, engine offset) of a client's offset string."""
    match = OFFSET_PATTERN.fullmatch(text)
    if match is None or int(match.group(1)) != FORMAT_VERSION:
        raise InvalidOffset(f"offset {text!r} is not of the form 001-TTTT-NNNNNNNNNNNNNNNNNN")
    timeline = int(match.group(2))
    if timeline == 0:
        raise InvalidOffset(f"offset {text!r} names timeline 0, which does not exist")
    return timeline, int(match.group(3))
