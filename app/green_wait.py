"""Waiting cooperatively for sockets, for less than gevent's own helpers cost, and
for the worker to have nothing else to run.

Sockets: used by the ZooKeeper client's handler (``app.coordination.zookeeper``)
and by the PostgreSQL wait callback (``app.repository.database``), which wait
for a socket many times per request. Idleness: by the postgres engine's group
commit (``app.storage.postgres_appender``).
"""

from __future__ import annotations

from typing import Any

import gevent
import gevent.hub

_EV_READ, _EV_WRITE = 1, 2  # libev's event bits, as the hub loop's io watchers take them


def first_ready(rlist: list[Any], wlist: list[Any], timeout: float | None
                ) -> tuple[list[Any], list[Any]]:
    """Waits cooperatively until one of the sockets (or file descriptors) can be
    read or written, or ``timeout`` seconds passed: the one that became ready
    first, or none. A watcher per socket on the hub's loop and one waiter: a
    ZooKeeper get costs the workers' client 76-82 us of CPU where it cost 113-130
    us with gevent's selector here (alternated runs on the 2-core machine;
    ``bench_zookeeper`` prints it next to kazoo's own handler), and a wait with a
    timeout 3.6 us where ``gevent.socket.wait_read`` takes 4.9 (it makes a
    ``Timeout`` exception for each)."""
    hub = gevent.get_hub()
    waiter: gevent.hub.Waiter[tuple[Any, bool] | None] = gevent.hub.Waiter(hub)
    watchers: list[Any] = []  # libev io and timer watchers
    try:
        for objects, events, readable in ((rlist, _EV_READ, True), (wlist, _EV_WRITE, False)):
            for obj in objects:
                watcher = hub.loop.io(fd_of(obj), events)
                watcher.start(waiter.switch, (obj, readable))
                watchers.append(watcher)
        if timeout is not None:
            timer = hub.loop.timer(timeout)
            # From the time now, not the loop's idea of it, which is as old as the
            # loop's last turn: a greenlet that kept the hub waiting for seconds (a
            # process that did blocking work) would have the timer fire at once.
            timer.start(waiter.switch, None, update=True)
            watchers.append(timer)
        fired = waiter.get()
    finally:
        for watcher in watchers:
            watcher.close()  # stops it too
    if fired is None:
        return [], []
    obj, readable = fired
    return ([obj], []) if readable else ([], [obj])


def until_idle(timeout: float) -> None:
    """Waits until no other greenlet is ready to run and no socket or timer of the
    worker is due (a libev idle watcher), or ``timeout`` seconds at most while the
    worker stays busy."""
    hub = gevent.get_hub()
    waiter: gevent.hub.Waiter[None] = gevent.hub.Waiter(hub)
    idle = hub.loop.idle()
    timer = hub.loop.timer(timeout)
    try:
        idle.start(waiter.switch, None)
        timer.start(waiter.switch, None, update=True)
        waiter.get()
    finally:
        idle.close()
        timer.close()


def fd_of(obj: Any) -> int:
    """The file descriptor of a socket, or the descriptor itself."""
    return obj if isinstance(obj, int) else obj.fileno()
