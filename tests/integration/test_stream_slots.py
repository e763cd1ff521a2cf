"""Slots of low-level streams on partitions, claimed in ZooKeeper by many streams at once."""

from __future__ import annotations

import gc
import uuid

import gevent

from app.coordination.stream_slots import ROOT, TooManyStreams, claim_slots


def test_streams_racing_for_new_partitions_get_exactly_the_slots_there_are(zookeeper):
    # Nothing exists yet under the event type: every claim finds its partitions missing.
    event_type = f"slots-{uuid.uuid4().hex[:8]}"
    claims = [gevent.spawn(claim_slots, zookeeper, event_type, [0, 1, 2], 5)
              for _ in range(12)]
    gevent.joinall(claims, timeout=60)
    held = [claim.value for claim in claims if claim.successful()]
    refused = [claim.exception for claim in claims if not claim.successful()]
    assert len(held) == 5
    assert all(isinstance(error, TooManyStreams) for error in refused)
    # A refused stream gave back what it took on every partition.
    for partition in range(3):
        assert len(zookeeper.get_children(f"{ROOT}/{event_type}/{partition}")) == 5
    for slots in held:
        slots.release()
    assert zookeeper.get_children(f"{ROOT}/{event_type}/1") == []


def test_claiming_and_releasing_leaves_no_garbage_for_the_cycle_collector(zookeeper):
    # What a stream leaves behind stays until the collector runs, which a worker of
    # idle streams hardly does: a thousand streams opened together cost megabytes.
    event_type = f"slots-{uuid.uuid4().hex[:8]}"
    claim_slots(zookeeper, event_type, [0, 1], 5).release()  # the partitions exist now
    gc.collect()
    gc.disable()
    try:
        for _ in range(20):
            claim_slots(zookeeper, event_type, [0, 1], 5).release()
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_releasing_gives_back_every_slot_that_is_still_there(zookeeper):
    # One node already gone (its session expired, say) must not keep the others.
    event_type = f"slots-{uuid.uuid4().hex[:8]}"
    slots = claim_slots(zookeeper, event_type, [0, 1, 2], 5)
    [node] = zookeeper.get_children(f"{ROOT}/{event_type}/1")
    zookeeper.delete(f"{ROOT}/{event_type}/1/{node}")
    slots.release()
    assert [zookeeper.get_children(f"{ROOT}/{event_type}/{p}") for p in range(3)] == [[], [], []]
