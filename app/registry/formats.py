"""The `format`s checked when events are validated.

jsonschema's own draft 4 checker checks neither `date-time` (it needs the optional
rfc3339-validator package, not installed here) nor `uuid` (not a draft 4 format), so both would
pass silently. This checker implements them itself; together they guard `metadata.eid` and
`metadata.occurred_at` of every business and data event.
"""

from __future__ import annotations

import re
from datetime import date

from jsonschema import Draft4Validator, FormatChecker

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_DATE_TIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))"
)


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


def _event_format_checker() -> FormatChecker:
    checker = FormatChecker(formats=())
    for name in ("email", "ipv4", "ipv6", "regex"):
        checker.checkers[name] = Draft4Validator.FORMAT_CHECKER.checkers[name]
    checker.checks("uuid")(is_uuid)
    checker.checks("date-time")(is_date_time)
    return checker


EVENT_FORMAT_CHECKER: FormatChecker = _event_format_checker()
