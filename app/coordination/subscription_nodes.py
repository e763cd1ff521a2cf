"""Where a subscription's coordination state lives in ZooKeeper.

Everything about one subscription (sessions of its streams, the partition
topology, committed offsets, the cursor-reset marker) sits under
``/subscriptions/<id>``, relative to the broker's ZooKeeper root, so deleting
that one node removes all of it and ends the streams watching it.
"""

from __future__ import annotations

import contextlib

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

ROOT = "/subscriptions"


def subscription_path(subscription_id: str) -> str:
    return f"{ROOT}/{subscription_id}"


def remove_subscription_state(zookeeper: KazooClient, subscription_id: str) -> None:
    """Delete the subscription's coordination state; its open streams see it go and end."""
    with contextlib.suppress(NoNodeError):
        zookeeper.delete(subscription_path(subscription_id), recursive=True)
