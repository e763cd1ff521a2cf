"""Waiting for a condition, the way tests wait: polling it, never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import gevent

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float = 10.0, interval: float = 0.05,
               what: str = "the condition") -> T:
    """The first truthy value of ``condition()``; fails the test after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout} s")
        gevent.sleep(interval)  # lets greenlets of the test process run meanwhile
