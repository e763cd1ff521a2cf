"""Background jobs that every worker process runs forever at a fixed interval."""

from __future__ import annotations

import logging
from collections.abc import Callable

import gevent

log = logging.getLogger(__name__)


def run_every(interval_s: float, job: Callable[[], int], what: str) -> gevent.Greenlet:
    """Run ``job`` every ``interval_s`` seconds in a greenlet. ``job`` returns how
    many things it did, logged as ``what`` when not zero; a failure is logged
    and the job tried again at the next interval."""
    def loop() -> None:
        while True:
            gevent.sleep(interval_s)
            try:
                done = job()
            except Exception:
                log.exception("%s failed; retrying next interval", what)
            else:
                if done:
                    log.info("%s: %d", what, done)
    return gevent.spawn(loop)
