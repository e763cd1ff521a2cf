"""Subscriptions: CRUD rules (crud.py) and JSON form (body.py); the stream state
machine (stream.py), commits, stats, and the rebalancing decision (rebalance.py)."""
