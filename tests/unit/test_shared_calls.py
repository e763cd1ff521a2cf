"""Callers asking the same at once share a call, never one that started before they asked."""

from __future__ import annotations

import gevent
import gevent.event

from app.dependencies import DependencyUnavailable
from app.shared_calls import SharedCalls


class Counter:
    """A slow call whose answer says which call it was."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = gevent.event.Event()

    def __call__(self) -> int:
        self.calls += 1
        this = self.calls
        self.release.wait(5)
        return this


def test_callers_at_once_share_one_call():
    shared: SharedCalls[str, int] = SharedCalls()
    counter = Counter()
    callers = [gevent.spawn(shared.call, "t", counter) for _ in range(10)]
    gevent.sleep(0.01)
    counter.release.set()
    assert [caller.get(timeout=2) for caller in callers] == [1] * 10
    assert counter.calls == 1


def test_a_caller_during_a_call_gets_the_next_one():
    """Its answer must not predate its question: the call in flight may have read
    before the caller's own write."""
    shared: SharedCalls[str, int] = SharedCalls()
    counter = Counter()
    first = gevent.spawn(shared.call, "t", counter)
    gevent.sleep(0.01)  # the first call runs
    later = [gevent.spawn(shared.call, "t", counter) for _ in range(5)]
    gevent.sleep(0.01)
    assert counter.calls == 1  # the next call waits for the one in flight
    counter.release.set()
    assert first.get(timeout=2) == 1
    assert [caller.get(timeout=2) for caller in later] == [2] * 5
    assert counter.calls == 2


def test_keys_do_not_share():
    shared: SharedCalls[str, int] = SharedCalls()
    counter = Counter()
    counter.release.set()
    callers = [gevent.spawn(shared.call, key, counter) for key in ("a", "b", "a")]
    assert sorted(caller.get(timeout=2) for caller in callers) == [1, 1, 2]


def test_an_error_reaches_every_caller_of_its_call_and_the_next_call_is_fresh():
    shared: SharedCalls[str, int] = SharedCalls()
    answers = iter([ValueError("broker gone"), 7])

    def flaky() -> int:
        gevent.sleep(0.01)
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    callers = [gevent.spawn(shared.call, "t", flaky) for _ in range(3)]
    gevent.joinall(callers, timeout=2)
    assert all(isinstance(caller.exception, ValueError) for caller in callers)
    assert shared.call("t", flaky) == 7


def test_a_caller_killed_while_waiting_leaves_the_others_their_answer():
    shared: SharedCalls[str, int] = SharedCalls()
    counter = Counter()
    callers = [gevent.spawn(shared.call, "t", counter) for _ in range(3)]
    gevent.sleep(0.01)
    callers[0].kill()
    counter.release.set()
    assert [caller.get(timeout=2) for caller in callers[1:]] == [1, 1]


def test_callers_waiting_behind_a_call_that_met_an_outage_take_its_answer():
    """They asked before it ended, so its failure is news to them; asking again would
    make them wait out a second timeout for their 503."""
    shared: SharedCalls[str, int] = SharedCalls()
    release = gevent.event.Event()
    calls = []

    def outage() -> int:
        calls.append(1)
        release.wait(5)
        raise DependencyUnavailable("Kafka", "no answer")

    first = gevent.spawn(shared.call, "t", outage)
    gevent.sleep(0.01)
    later = [gevent.spawn(shared.call, "t", outage) for _ in range(3)]
    gevent.sleep(0.01)
    release.set()
    gevent.joinall([first, *later], timeout=2)
    assert all(isinstance(caller.exception, DependencyUnavailable) for caller in [first, *later])
    assert len(calls) == 1
    # Who asks after that asks afresh.
    assert shared.call("t", lambda: 7) == 7
