"""Subscriptions: their CRUD rules (crud.py) and JSON form (body.py)."""
