"""Waiting for a condition, the way tests wait: polling it, never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import gevent
import requests

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


def first_200(opening: Callable[[], requests.Response], timeout: float, what: str
              ) -> requests.Response:
    """The first response of ``opening()`` that is a 200 (a stream that opened),
    refused ones closed; fails the test after ``timeout`` s."""
    def attempt() -> requests.Response | None:
        response = opening()
        if response.status_code == 200:
            return response
        response.close()
        return None
    return wait_until(attempt, timeout=timeout, what=what)
