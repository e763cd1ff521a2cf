"""Hostile input stops at the door: request bodies (``app.api.body.json_body``, and
anything else read through Flask's JSON provider) follow the strict JSON rules of
``app.strict_json`` and hold no NUL character, and a NUL character in the path or
a query parameter is a 400, before any handler, database or regular expression
sees it."""

from __future__ import annotations

from typing import Any

from flask import Flask
from flask.json.provider import DefaultJSONProvider

from app import strict_json
from app.current import current_request
from app.problems import Problem


class StrictJSONProvider(DefaultJSONProvider):
    """Flask's JSON with the broker's reading rules; written bodies keep the key order
    the code builds them in (Nakadi's field order)."""

    sort_keys = False

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        text = s.encode() if isinstance(s, str) else s
        value = strict_json.loads(text)
        if b"\\u0000" not in text:
            return value  # JSON text can only hold a NUL as that escape
        where = strict_json.find_nul(value)
        if where is not None:
            raise strict_json.InvalidJson(f"{where} holds a NUL character (\\u0000)")
        return value


def install_input_guard(app: Flask) -> None:
    app.json = StrictJSONProvider(app)

    @app.before_request
    def _refuse_nul_characters() -> None:
        asked = current_request()
        if "\x00" in asked.path:
            raise Problem(400, "the path holds a NUL character (%00)")
        if not asked.query_string:
            return  # nothing to parse: a publish or a commit has no query
        for name, value in asked.args.items(multi=True):
            if "\x00" in name or "\x00" in value:
                raise Problem(400, f"the query parameter {name!r} holds a NUL character (%00)")
