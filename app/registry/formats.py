"""The `format`s checked when events are validated, for both validation engines.

Events are checked against `uuid`, `date-time`, `email`, `ipv4`, `ipv6` and `regex`; every other
format passes. Together `uuid` and `date-time` guard `metadata.eid` and `metadata.occurred_at` of
every business and data event.

- `NATIVE_FORMATS` completes jsonschema-rs (what validates nearly all event types). Its own
  `date-time`, `ipv4` and `ipv6` agree with ours and are kept (no Python call for
  `occurred_at`; its `date-time` only also refuses leap seconds other than at 23:59:60 UTC and
  takes the year 0000, which Python's dates lack). `uuid` (not a draft 4 format, so it would
  pass) is `is_uuid`; `email` and `regex` stay jsonschema's looser checks (any `@`; Python's
  regex syntax) so that no value accepted before is refused now; and the formats jsonschema-rs
  would check on its own but we never did (`date`, `time`, `hostname`, `idn-email`, `uri`) are
  let through.
- `EVENT_FORMAT_CHECKER` is for jsonschema, the fallback engine. Its draft 4 checker checks
  neither `date-time` (it needs the optional rfc3339-validator package, not installed here) nor
  `uuid`, so `is_date_time` and `is_uuid` are added to it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date

from jsonschema import Draft4Validator, FormatChecker

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# [0-9], not \d: \d would also take other scripts' digits (int() reads them, too).
_DATE_TIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-]([0-9]{2}):([0-9]{2}))"
)
# Checked by jsonschema-rs's draft 4 validator unless overridden, never checked for events.
_UNCHECKED_NATIVE_FORMATS = ("date", "time", "hostname", "idn-email", "uri")


def is_uuid(value: object) -> bool:
    """The canonical 8-4-4-4-12 hex form; braces, `urn:uuid:` and hyphen-less forms are refused."""
    return not isinstance(value, str) or _UUID.fullmatch(value) is not None


def is_date_time(value: object) -> bool:
    """An RFC 3339 `date-time`: a real calendar date, a time of day and a mandatory offset."""
    if not isinstance(value, str):
        return True
    match = _DATE_TIME.fullmatch(value)
    if match is None:
        return False
    year, month, day, hour, minute, second, offset_hour, offset_minute = match.groups()
    try:
        date(int(year), int(month), int(day))
    except ValueError:
        return False
    return (
        int(hour) < 24
        and int(minute) < 60
        and int(second) <= 60  # 60 is a leap second
        and (offset_hour is None or (int(offset_hour) < 24 and int(offset_minute) < 60))
    )


def is_regex(value: object) -> bool:
    """Python's regex syntax, as jsonschema checks it, except that a pattern ``re`` cannot
    compile for its size or depth (``a{4294967296}``, a thousand nested groups) is not a
    regex either: ``re`` raises ``OverflowError`` and ``RecursionError`` for those, which
    jsonschema's check lets through, as a 500."""
    if not isinstance(value, str):
        return True
    try:
        re.compile(value)
    except (re.error, OverflowError, RecursionError):
        return False
    return True


def _event_format_checker() -> FormatChecker:
    checker = FormatChecker(formats=())
    for name in ("email", "ipv4", "ipv6"):
        checker.checkers[name] = Draft4Validator.FORMAT_CHECKER.checkers[name]
    checker.checks("regex")(is_regex)
    checker.checks("uuid")(is_uuid)
    checker.checks("date-time")(is_date_time)
    return checker


def schema_format_checker() -> FormatChecker:
    """jsonschema's draft 4 format checker with ``is_regex``: for checking schemas against
    the meta-schema, whose ``pattern`` is a ``regex``."""
    checker = FormatChecker(formats=())
    checker.checkers.update(Draft4Validator.FORMAT_CHECKER.checkers)
    checker.checks("regex")(is_regex)
    return checker


EVENT_FORMAT_CHECKER: FormatChecker = _event_format_checker()


def _checked_by_jsonschema(name: str) -> Callable[[str], bool]:
    def conforms(value: str) -> bool:
        return EVENT_FORMAT_CHECKER.conforms(value, name)

    return conforms


def _unchecked(value: str) -> bool:
    return True


NATIVE_FORMATS: dict[str, Callable[[str], bool]] = {
    "uuid": is_uuid,
    "email": _checked_by_jsonschema("email"),
    "regex": is_regex,
    **dict.fromkeys(_UNCHECKED_NATIVE_FORMATS, _unchecked),
}
"""The `formats` argument of jsonschema-rs validators (it only calls them for strings)."""
