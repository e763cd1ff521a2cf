"""The pure rebalancing decision: joins, leaves, direct assignment, uneven counts."""

from __future__ import annotations

import itertools
import random
from collections import Counter

from app.domain.topology import PartitionAssignment, Session, Topology
from app.subscriptions.rebalance import hand_over, rebalance

KEYS = [("a", "0"), ("a", "1"), ("b", "0"), ("b", "1"), ("b", "2"), ("b", "3")]
EMPTY = Topology(())


def owners(topology: Topology) -> dict:
    """Where each partition is heading (its owner once hand-overs are done)."""
    return {p.key: p.heading_to() for p in topology.partitions}


def counts(topology: Topology) -> Counter:
    return Counter(owner for owner in owners(topology).values() if owner)


def settled(topology: Topology) -> Topology:
    """Every hand-over done."""
    for p in topology.partitions:
        if p.state == "reassigning":
            topology = hand_over(topology, p.session, [p.key])
    return topology


def sessions(*ids: str) -> list[Session]:
    return [Session(i) for i in ids]


def test_first_session_gets_every_partition_at_once():
    topology = rebalance(EMPTY, KEYS, sessions("s1"))
    assert [p.key for p in topology.partitions] == KEYS
    assert all(p.state == "assigned" and p.session == "s1" for p in topology.partitions)


def test_no_session_leaves_everything_unassigned():
    topology = rebalance(EMPTY, KEYS, [])
    assert all(p.state == "unassigned" and p.session is None for p in topology.partitions)


def test_partitions_are_ordered_by_number_not_by_text():
    keys = [("a", str(n)) for n in (10, 2, 1, 0)]
    topology = rebalance(EMPTY, keys, sessions("s1"))
    assert [p.partition for p in topology.partitions] == ["0", "1", "2", "10"]


def test_a_joining_session_takes_half_through_reassignment():
    one = rebalance(EMPTY, KEYS, sessions("s1"))
    two = rebalance(one, KEYS, sessions("s1", "s2"))
    assert counts(two) == {"s1": 3, "s2": 3}
    moving = [p for p in two.partitions if p.heading_to() == "s2"]
    # s1 is alive: it still streams them until it hands them over.
    assert all(p.state == "reassigning" and p.session == "s1" for p in moving)
    staying = [p for p in two.partitions if p.heading_to() == "s1"]
    assert all(p.state == "assigned" for p in staying)


def test_hand_over_gives_the_partition_to_the_next_session():
    two = rebalance(rebalance(EMPTY, KEYS, sessions("s1")), KEYS, sessions("s1", "s2"))
    moving = [p.key for p in two.partitions if p.state == "reassigning"]
    after = hand_over(two, "s1", moving[:1])
    moved = after.get(moving[0])
    assert moved.state == "assigned" and moved.session == "s2" and moved.next_session is None
    assert after.get(moving[1]).state == "reassigning"


def test_hand_over_by_a_session_that_does_not_hold_it_changes_nothing():
    one = rebalance(EMPTY, KEYS, sessions("s1"))
    assert hand_over(one, "s2", KEYS) == one


def test_hand_over_of_a_held_partition_without_successor_unassigns_it():
    one = rebalance(EMPTY, KEYS, sessions("s1"))
    released = hand_over(one, "s1", KEYS[:2])
    assert [p.state for p in released.partitions[:2]] == ["unassigned", "unassigned"]
    assert released.partitions[2].session == "s1"


def test_partitions_of_a_session_that_left_move_at_once():
    two = settled(rebalance(rebalance(EMPTY, KEYS, sessions("s1")), KEYS,
                            sessions("s1", "s2")))
    left = rebalance(two, KEYS, sessions("s2"))
    assert all(p.state == "assigned" and p.session == "s2" for p in left.partitions)


def test_a_leave_moves_only_the_partitions_of_the_leaver():
    three = settled(rebalance(EMPTY, KEYS, sessions("s1", "s2", "s3")))
    assert counts(three) == {"s1": 2, "s2": 2, "s3": 2}
    after = rebalance(three, KEYS, sessions("s1", "s3"))
    assert counts(after) == {"s1": 3, "s3": 3}
    before_owner, after_owner = owners(three), owners(after)
    for key in KEYS:
        if before_owner[key] != "s2":
            assert after_owner[key] == before_owner[key]
    assert all(p.state == "assigned" for p in after.partitions)


def test_uneven_counts_differ_by_at_most_one():
    for partitions, streams in itertools.product(range(1, 9), range(1, 10)):
        keys = [("e", str(n)) for n in range(partitions)]
        topology = settled(rebalance(EMPTY, keys, sessions(*[f"s{n}" for n in range(streams)])))
        per_session = counts(topology)
        assert sum(per_session.values()) == partitions
        if streams <= partitions:
            assert max(per_session.values()) - min(per_session.values()) <= 1
            assert len(per_session) == streams
        else:  # more streams than partitions: some get nothing, none gets two
            assert set(per_session.values()) == {1}


def test_a_rebalance_with_the_same_sessions_moves_nothing():
    topology = settled(rebalance(EMPTY, KEYS, sessions("s1", "s2", "s3", "s4")))
    assert rebalance(topology, KEYS, sessions("s1", "s2", "s3", "s4")) == topology


def test_a_join_moves_no_more_than_needed():
    four = settled(rebalance(EMPTY, KEYS, sessions("s1", "s2", "s3")))
    after = rebalance(four, KEYS, sessions("s1", "s2", "s3", "s4"))
    moved = [key for key in KEYS if owners(after)[key] != owners(four)[key]]
    assert len(moved) == 1 and owners(after)[moved[0]] == "s4"


def test_the_result_does_not_depend_on_the_order_of_the_input():
    base = settled(rebalance(EMPTY, KEYS, sessions("s1", "s2")))
    expected = rebalance(base, KEYS, sessions("s1", "s2", "s3"))
    generator = random.Random(7)
    for _ in range(20):
        keys, members = KEYS[:], sessions("s1", "s2", "s3")
        generator.shuffle(keys)
        generator.shuffle(members)
        shuffled = Topology(tuple(generator.sample(base.partitions, len(base.partitions))))
        assert rebalance(shuffled, keys, members) == expected


def test_direct_requests_are_honoured_and_the_rest_spread_over_auto_sessions():
    direct = Session("d", frozenset({("b", "2"), ("a", "0")}))
    topology = rebalance(EMPTY, KEYS, [direct, *sessions("s1", "s2")])
    assert owners(topology)[("a", "0")] == "d" and owners(topology)[("b", "2")] == "d"
    assert counts(topology) == {"d": 2, "s1": 2, "s2": 2}


def test_a_direct_request_takes_a_partition_from_an_auto_session_by_reassignment():
    one = rebalance(EMPTY, KEYS, sessions("s1"))
    after = rebalance(one, KEYS, [Session("s1"), Session("d", frozenset({("b", "3")}))])
    taken = after.get(("b", "3"))
    assert taken.state == "reassigning" and taken.session == "s1" and taken.next_session == "d"
    assert counts(after) == {"s1": 5, "d": 1}


def test_direct_sessions_get_nothing_they_did_not_ask_for():
    topology = rebalance(EMPTY, KEYS, [Session("d", frozenset({("a", "1")}))])
    assert owners(topology) == {key: ("d" if key == ("a", "1") else None) for key in KEYS}


def test_two_direct_requests_for_one_partition_keep_it_where_it_is():
    first = rebalance(EMPTY, KEYS, [Session("z", frozenset({("a", "0")}))])
    both = rebalance(first, KEYS, [Session("z", frozenset({("a", "0")})),
                                   Session("a", frozenset({("a", "0")}))])
    assert owners(both)[("a", "0")] == "z"


def test_a_closing_session_keeps_what_it_holds_until_another_takes_it():
    one = rebalance(EMPTY, KEYS, sessions("s1"))
    alone = rebalance(one, KEYS, [Session("s1", closing=True)])
    assert alone == one
    joined = rebalance(one, KEYS, [Session("s1", closing=True), Session("s2")])
    assert all(p.state == "reassigning" and p.session == "s1" and p.next_session == "s2"
               for p in joined.partitions)


def test_a_closing_session_does_not_count_against_the_partitions():
    one = rebalance(EMPTY, KEYS[:1], sessions("s1"))
    after = rebalance(one, KEYS[:1], [Session("s1", closing=True), Session("s2")])
    assert owners(after) == {KEYS[0]: "s2"}


def test_a_reassignment_whose_next_session_left_stays_with_the_holder():
    two = rebalance(rebalance(EMPTY, KEYS, sessions("s1")), KEYS, sessions("s1", "s2"))
    after = rebalance(two, KEYS, sessions("s1"))
    assert all(p.state == "assigned" and p.session == "s1" for p in after.partitions)


def test_partitions_no_longer_in_the_subscription_are_dropped_and_new_ones_placed():
    one = rebalance(EMPTY, KEYS[:2], sessions("s1"))
    after = rebalance(one, KEYS[1:3], sessions("s1"))
    assert [p.key for p in after.partitions] == KEYS[1:3]
    assert all(p.session == "s1" for p in after.partitions)


def test_a_stale_assignment_to_a_dead_session_is_replaced():
    stale = Topology((PartitionAssignment("a", "0", "reassigning", "gone", "also-gone"),))
    after = rebalance(stale, [("a", "0")], sessions("s1"))
    assert after.partitions == (PartitionAssignment("a", "0", "assigned", "s1"),)
