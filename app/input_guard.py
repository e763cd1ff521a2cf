"""Hostile input stops at the door: request bodies (``app.api.body.json_body``, and
anything else read through Flask's JSON provider) follow the strict JSON rules of
``app.strict_json`` and hold no NUL character, and a NUL character in the path or
a query parameter is a 400, before any handler, database or regular expression
sees it; a transfer coding gunicorn does not decode is a 501."""

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
    def _refuse_transfer_codings_not_decoded() -> None:
        # gunicorn takes gzip, deflate and compress before chunked, and passes the body on
        # undecoded: a 501, as RFC 9112 asks for a transfer coding the server does not
        # implement (and as gunicorn answers for any other), not a JSON error or a 200.
        sent = current_request().headers.get("Transfer-Encoding")
        if sent is None:
            return
        for coding in (part.strip(" \t").lower() for part in sent.split(",")):
            if coding not in ("chunked", "identity"):
                raise Problem(501, f"Transfer-Encoding '{coding}' is not supported: send the "
                                   "body chunked alone, compressed with Content-Encoding: gzip "
                                   "if you want")

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
