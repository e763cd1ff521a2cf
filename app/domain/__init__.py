"""Typed objects every room shares (event types, timelines, cursors, subscriptions).

Nothing here does I/O: the repository builds these objects, the rooms above use them.
"""
