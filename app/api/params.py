"""Query parameters and the body's Content-Type, checked: a bad value is a Problem
naming what to fix."""

from __future__ import annotations

from collections.abc import Mapping

from flask import request

from app.problems import Problem


def int_param(name: str, default: int, minimum: int, maximum: int | None = None,
              status: int = 400, source: Mapping[str, str] | None = None) -> int:
    """An integer query parameter (or value of ``source``) within bounds; otherwise
    a Problem of ``status``."""
    raw = (request.args if source is None else source).get(name)
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


def require_json_content_type() -> None:
    """A 415 unless the body is declared as ``application/json``."""
    if request.mimetype != "application/json":
        raise Problem(415, f"Content-Type must be application/json, not "
                           f"'{request.mimetype or 'missing'}'")
