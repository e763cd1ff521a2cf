"""The parameters every stream shares, with the spec's defaults."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_FLUSH_TIMEOUT_S = 30
MAX_STREAM_TIMEOUT_S = 4200
DEFAULT_STREAM_TIMEOUT_S = 3600
# Streams left at the default end spread over +/- 10 minutes, so that clients that
# connected together do not all reconnect together.
STREAM_TIMEOUT_JITTER_S = 600


@dataclass(frozen=True)
class StreamLimits:
    batch_limit: int = 1
    stream_limit: int = 0  # 0: unlimited
    batch_flush_timeout: float = float(DEFAULT_FLUSH_TIMEOUT_S)
    stream_timeout: float = float(DEFAULT_STREAM_TIMEOUT_S)
    stream_keep_alive_limit: int = 0  # 0: unlimited
