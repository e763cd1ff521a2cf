"""What a subscription stream is asked for, the phases of its life, and how
starting one can be refused."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from app.domain.topology import PartitionKey
from app.streaming.limits import StreamLimits

MAX_COMMIT_TIMEOUT_S = 60.0


class StreamRefused(Exception):
    """The stream cannot start; ``status`` (409) and the message say why."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status


class Phase(Enum):
    STARTING = "starting"
    STREAMING = "streaming"
    CLOSING = "closing"
    CLEANUP = "cleanup"
    ENDED = "ended"


@dataclass(frozen=True)
class SubscriptionStreamParams:
    limits: StreamLimits = field(default_factory=StreamLimits)
    max_uncommitted_events: int = 10
    commit_timeout: float = MAX_COMMIT_TIMEOUT_S
    requested: frozenset[PartitionKey] = frozenset()
