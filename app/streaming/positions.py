"""Where the events a stream took, and has not sent yet, lie in their partitions.

A batch's cursor is the position of its last event. Counting the events sent is
not enough: a reader goes past what is gone (events removed by retention while
the stream lagged, a timeline cleaned up), so the events of a partition are not
always at consecutive positions. Counted, every cursor after such a gap named an
earlier position, one whose event was never sent (or that no longer exists).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Mapping
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class TakenPositions(Generic[K]):
    """Per partition (keyed by ``K``), the runs of positions of the events taken and
    not yet sent, in order, and the position of the last event sent."""

    def __init__(self, sent: Mapping[K, int]) -> None:
        self.sent = dict(sent)
        self._taken: dict[K, deque[list[int]]] = {key: deque() for key in sent}

    def reset(self, key: K, sent: int) -> None:
        """The partition's last event sent is at ``sent``, and none is taken (a new
        partition, or one whose taken events were dropped)."""
        self.sent[key] = sent
        self._taken[key] = deque()

    def forget(self, key: K) -> None:
        del self.sent[key], self._taken[key]

    def take(self, key: K, first: int, count: int) -> None:
        """``count`` events at consecutive positions from ``first`` join the partition's."""
        if count <= 0:
            return
        runs = self._taken[key]
        if runs and runs[-1][0] + runs[-1][1] == first:
            runs[-1][1] += count
        else:
            runs.append([first, count])

    def send(self, key: K, count: int) -> int:
        """The next ``count`` events of the partition go out: the position of the last
        of them (the last sent before, for none)."""
        runs = self._taken[key]
        while count > 0:
            first, length = runs[0]
            if length > count:
                runs[0] = [first + count, length - count]
                self.sent[key] = first + count - 1
                return self.sent[key]
            runs.popleft()
            self.sent[key] = first + length - 1
            count -= length
        return self.sent[key]
