"""Query parameters, paging links and the JSON body, checked: a bad value is a
Problem naming what to fix."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from urllib.parse import urlencode

from flask import request

from app.current import current_request
from app.problems import Problem

# Python's int() also takes "1_0", "+5", " 5" and non-ASCII digits; a query integer is digits,
# at most 19 of them: no bound here is larger, and int() refuses more than 4,300 (a 500).
INTEGER = re.compile(r"-?[0-9]{1,19}")
MAX_OFFSET = 2**63 - 1
"""The largest paging offset: PostgreSQL's OFFSET is a bigint."""


def int_param(name: str, default: int, minimum: int, maximum: int | None = None,
              status: int = 400, source: Mapping[str, str] | None = None) -> int:
    """An integer query parameter (or value of ``source``) within bounds; otherwise
    a Problem of ``status``."""
    raw = (request.args if source is None else source).get(name)
    if raw is None or raw == "":
        return default
    bounds = (f"between {minimum} and {maximum}" if maximum is not None
              else f">= {minimum} of at most 19 digits")
    value = int(raw) if INTEGER.fullmatch(raw) is not None else None
    if value is None or value < minimum or (maximum is not None and value > maximum):
        raise Problem(status, f"'{name}' must be an integer {bounds}, got {raw[:40]!r}")
    return value


def require_json_content_type() -> None:
    """A 415 unless the body is declared as ``application/json``."""
    mimetype = current_request().mimetype
    if mimetype != "application/json":
        raise Problem(415, f"Content-Type must be application/json, not "
                           f"'{mimetype or 'missing'}'")


def bool_param(name: str, default: bool = False) -> bool:
    """A boolean query parameter, ``true`` or ``false`` (any case); otherwise a 400."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    raise Problem(400, f"'{name}' must be true or false, got {raw!r}")


def pagination_links(offset: int, limit: int, has_more: bool,
                     query: Sequence[tuple[str, str]] = ()) -> dict[str, dict[str, str]]:
    """``_links`` of a page: ``prev`` unless it is the first, ``next`` when more follow.
    The hrefs keep the request's path and the other parameters given in ``query``."""
    def href(page_offset: int) -> dict[str, str]:
        return {"href": f"{request.path}?"
                        f"{urlencode([*query, ('offset', page_offset), ('limit', limit)])}"}

    links = {}
    if offset > 0:
        links["prev"] = href(max(0, offset - limit))
    if has_more:
        links["next"] = href(offset + limit)
    return links
