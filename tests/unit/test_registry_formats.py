"""The formats checked in events: uuid and date-time must really be checked."""

import pytest
from jsonschema import Draft4Validator

from app.registry.formats import EVENT_FORMAT_CHECKER, is_date_time, is_uuid


@pytest.mark.parametrize(
    "value",
    [
        "d765de34-09c0-4bbb-8b1e-7160a33a0791",
        "D765DE34-09C0-4BBB-8B1E-7160A33A0791",
        "00000000-0000-0000-0000-000000000000",
    ],
)
def test_uuids_accepted(value):
    assert is_uuid(value)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "d765de34",
        "d765de3409c04bbb8b1e7160a33a0791",
        "{d765de34-09c0-4bbb-8b1e-7160a33a0791}",
        "urn:uuid:d765de34-09c0-4bbb-8b1e-7160a33a0791",
        "g765de34-09c0-4bbb-8b1e-7160a33a0791",
        "d765de34-09c0-4bbb-8b1e-7160a33a0791\n",
    ],
)
def test_uuids_refused(value):
    assert not is_uuid(value)


@pytest.mark.parametrize(
    "value",
    [
        "2016-03-15T23:47:15+01:00",
        "1996-12-19T16:39:57-08:00",
        "2016-03-15T23:47:15Z",
        "2016-03-15t23:47:15z",
        "2016-03-15T23:47:15.123456789Z",
        "2016-02-29T00:00:00Z",
        "2016-12-31T23:59:60Z",
    ],
)
def test_date_times_accepted(value):
    assert is_date_time(value)


@pytest.mark.parametrize(
    "value",
    [
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
    ],
)
def test_date_times_refused(value):
    assert not is_date_time(value)


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
