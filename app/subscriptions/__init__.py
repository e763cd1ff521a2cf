"""Subscriptions: the stream state machine, commits, stats, and the rebalancing decision."""
