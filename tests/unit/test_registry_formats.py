"""The formats checked in events: uuid and date-time must really be checked, by both engines."""

import pytest
from jsonschema import Draft4Validator

from app.registry.event_validator import EventValidator
from app.registry.formats import EVENT_FORMAT_CHECKER, is_date_time, is_uuid

# A regex jsonschema-rs cannot compile, so that EventValidator leaves the schema to jsonschema.
PYTHON_ONLY = {"definitions": {"python-only": {"pattern": "\\Z"}}}
ENGINES = {"jsonschema-rs": {}, "jsonschema": PYTHON_ONLY}


def checks(engine, name, value):
    """Whether an EventValidator on `engine` accepts `value` for `format: name`."""
    validator = EventValidator({**ENGINES[engine], "properties": {"v": {"format": name}}})
    assert validator.engine == engine
    return validator.is_valid({"v": value})


UUIDS_ACCEPTED = [
    "d765de34-09c0-4bbb-8b1e-7160a33a0791",
    "D765DE34-09C0-4BBB-8B1E-7160A33A0791",
    "00000000-0000-0000-0000-000000000000",
]
UUIDS_REFUSED = [
    "",
    "d765de34",
    "d765de3409c04bbb8b1e7160a33a0791",
    "{d765de34-09c0-4bbb-8b1e-7160a33a0791}",
    "urn:uuid:d765de34-09c0-4bbb-8b1e-7160a33a0791",
    "g765de34-09c0-4bbb-8b1e-7160a33a0791",
    "d765de34-09c0-4bbb-8b1e-7160a33a0791\n",
]
DATE_TIMES_ACCEPTED = [
    "2016-03-15T23:47:15+01:00",
    "1996-12-19T16:39:57-08:00",
    "2016-03-15T23:47:15Z",
    "2016-03-15t23:47:15z",
    "2016-03-15T23:47:15.123456789Z",
    "2016-02-29T00:00:00Z",
    "2016-12-31T23:59:60Z",
    "1990-12-31T15:59:60-08:00",  # a leap second (23:59:60 UTC) at UTC-8
]
DATE_TIMES_REFUSED = [
    "",
    "2016-03-15",
    "2016-03-15T23:47:15",
    "2016-03-15 23:47:15Z",
    "2015-02-29T00:00:00Z",
    "2016-13-01T00:00:00Z",
    "2016-03-15T24:00:00Z",
    "2016-03-15T23:60:00Z",
    "2016-03-15T23:47:61Z",
    "2016-03-15T23:47:15+25:00",
    "2016-03-15T23:47:15+01",
    "1458082035",
    "2016-03-15T23:47:15+01:00 ",
    "٢٠١٦-03-15T23:47:15Z",  # digits, but not ASCII ones
]


@pytest.mark.parametrize("value", UUIDS_ACCEPTED)
def test_uuids_accepted(value):
    assert is_uuid(value)


@pytest.mark.parametrize("value", UUIDS_REFUSED)
def test_uuids_refused(value):
    assert not is_uuid(value)


@pytest.mark.parametrize("value", DATE_TIMES_ACCEPTED)
def test_date_times_accepted(value):
    assert is_date_time(value)


@pytest.mark.parametrize("value", DATE_TIMES_REFUSED)
def test_date_times_refused(value):
    assert not is_date_time(value)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("name", "value", "valid"),
    [
        *(("uuid", value, True) for value in UUIDS_ACCEPTED),
        *(("uuid", value, False) for value in UUIDS_REFUSED),
        # jsonschema-rs's own date-time, not is_date_time: they agree on all of these.
        *(("date-time", value, True) for value in DATE_TIMES_ACCEPTED),
        *(("date-time", value, False) for value in DATE_TIMES_REFUSED),
        # jsonschema's loose email check (any @) is kept: jsonschema-rs's would refuse these.
        *(("email", value, True) for value in ["a@b.c", "é@ü.de", "a b@c", "@"]),
        ("email", "nobody", False),
        *(("ipv4", value, True) for value in ["1.2.3.4", "0.0.0.0"]),
        *(("ipv4", value, False) for value in ["01.2.3.4", "256.1.1.1", "1.2.3", "1.2.3.4\n"]),
        *(("ipv6", value, True) for value in ["::1", "::ffff:1.2.3.4", "1:2:3:4:5:6:7:8"]),
        *(("ipv6", value, False) for value in ["1::2::3", "fe80::1%eth0", "[::1]", "::1\n"]),
        # Python's regex syntax, which `pattern`s are read in, too.
        *(("regex", value, True) for value in ["a+", "\\Z", "(?P<n>a)(?P=n)", "]"]),
        # re raises OverflowError and RecursionError for the last two, not re.error.
        *(("regex", value, False)
          for value in ["((", "\\p{L}", "a{4294967296}", "(" * 1000 + ")" * 1000]),
    ],
)
def test_formats_are_checked_alike_by_both_engines(engine, name, value, valid):
    assert checks(engine, name, value) is valid


@pytest.mark.parametrize(
    ("value", "native", "fallback"),
    [
        # jsonschema-rs takes a leap second only at 23:59:60 UTC, as RFC 3339 has it.
        ("2016-12-31T23:59:60+01:00", False, True),
        # RFC 3339 has a year 0; Python's dates, which is_date_time builds, do not.
        ("0000-01-01T00:00:00Z", True, False),
    ],
)
def test_date_times_the_engines_disagree_on(value, native, fallback):
    assert checks("jsonschema-rs", "date-time", value) is native
    assert checks("jsonschema", "date-time", value) is fallback


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    "name", ["date", "time", "hostname", "idn-email", "uri", "uri-reference", "json-pointer"]
)
def test_other_formats_are_not_checked(engine, name):
    assert checks(engine, name, "\u0000 not (( a value of any format")


@pytest.mark.parametrize("engine", ENGINES)
def test_formats_are_not_checked_for_other_types(engine):
    for name in ("uuid", "date-time", "email", "ipv4", "ipv6", "regex"):
        for value in (1, None, ["x"], {"a": 1}):
            assert checks(engine, name, value)


@pytest.mark.parametrize("value", [1, None, ["x"], {"a": 1}])
def test_formats_apply_to_strings_only(value):
    assert is_uuid(value)
    assert is_date_time(value)


def test_format_checking_is_enabled_for_events():
    schema = {
        "properties": {
            "eid": {"format": "uuid"},
            "at": {"format": "date-time"},
            "mail": {"format": "email"},
            "pattern": {"format": "regex"},
        }
    }
    validator = Draft4Validator(schema, format_checker=EVENT_FORMAT_CHECKER)
    bad = {"eid": "x", "at": "y", "mail": "z", "pattern": "(("}
    assert sorted(error.path[0] for error in validator.iter_errors(bad)) == [
        "at",
        "eid",
        "mail",
        "pattern",
    ]
