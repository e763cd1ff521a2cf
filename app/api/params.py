"""Query parameters, checked: a bad value is a Problem naming the parameter."""

from __future__ import annotations

from flask import request

from app.problems import Problem


def int_param(name: str, default: int, minimum: int, maximum: int | None = None,
              status: int = 400) -> int:
    """An integer query parameter within bounds; otherwise a Problem of ``status``."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise Problem(status, f"'{name}' must be an integer, got {raw!r}") from None
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise Problem(status, f"'{name}' must be {bounds}, got {value}")
    return value
