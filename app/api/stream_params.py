"""The stream parameters of a streaming request (low-level or subscription),
checked: a value that is not a non-negative integer, or that contradicts
another, is a 422 naming it."""

from __future__ import annotations

import random
from collections.abc import Mapping

from app.api.params import int_param
from app.problems import Problem
from app.streaming.limits import (
    DEFAULT_FLUSH_TIMEOUT_S,
    DEFAULT_STREAM_TIMEOUT_S,
    MAX_STREAM_TIMEOUT_S,
    STREAM_TIMEOUT_JITTER_S,
    StreamLimits,
)

INT32_MAX = 2**31 - 1


def count_param(name: str, default: int, source: Mapping[str, str] | None = None) -> int:
    """A non-negative int32 stream parameter (001: ``format: int32``) of the query or
    of ``source``; anything else is a 422 naming it."""
    return int_param(name, default, 0, INT32_MAX, status=422, source=source)


def stream_limits(source: Mapping[str, str] | None = None) -> StreamLimits:
    """The stream parameters of the request (or of ``source``, by default the query),
    with the spec's defaults and rules."""
    batch_limit = count_param("batch_limit", 1, source)
    if batch_limit < 1:
        raise Problem(422, "batch_limit must be at least 1")
    stream_limit = count_param("stream_limit", 0, source)
    if stream_limit and stream_limit < batch_limit:
        raise Problem(422, f"stream_limit ({stream_limit}) must not be lower than batch_limit "
                           f"({batch_limit})")
    flush_timeout = count_param("batch_flush_timeout", 0, source) or DEFAULT_FLUSH_TIMEOUT_S
    stream_timeout: float = count_param("stream_timeout", 0, source)
    if stream_timeout == 0 or stream_timeout > MAX_STREAM_TIMEOUT_S:
        stream_timeout = DEFAULT_STREAM_TIMEOUT_S + random.uniform(
            -STREAM_TIMEOUT_JITTER_S, STREAM_TIMEOUT_JITTER_S)
    elif stream_timeout < flush_timeout:
        raise Problem(422, f"stream_timeout ({stream_timeout}) must not be lower than "
                           f"batch_flush_timeout ({flush_timeout})")
    return StreamLimits(batch_limit, stream_limit, float(flush_timeout), float(stream_timeout),
                        count_param("stream_keep_alive_limit", 0, source))
