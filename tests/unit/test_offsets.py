import pytest

from app.storage.offsets import InvalidOffset, decode_offset, encode_offset


def test_offsets_round_trip():
    for timeline, offset in [(1, -1), (1, 0), (1, 42), (12, 10**17), (9999, 10**18 - 1)]:
        assert decode_offset(encode_offset(timeline, offset)) == (timeline, offset)


def test_encoding_is_the_documented_form():
    assert encode_offset(1, 42) == "001-0001-000000000000000042"
    assert encode_offset(1, -1) == "001-0001--1"


def test_string_order_is_event_order_within_and_across_timelines():
    positions = [(1, -1), (1, 0), (1, 9), (1, 10), (1, 123456), (2, -1), (2, 0), (10, 5)]
    strings = [encode_offset(t, o) for t, o in positions]
    assert sorted(strings) == strings


@pytest.mark.parametrize("text", [
    "", "42", "begin", "001-0001-42", "002-0001-000000000000000042", "001-0000-000000000000000001",
    "001-0001-00000000000000004x", "001-0001--2", " 001-0001-000000000000000042",
    # Python's $ also matches before a last newline, and \d takes other scripts' digits.
    "001-0001-000000000000000042\n", "001-0001--1\n", "001-0001-00000000000000004\u0662",
])
def test_strings_the_broker_never_issued_are_refused(text):
    with pytest.raises(InvalidOffset):
        decode_offset(text)


def test_impossible_positions_cannot_be_encoded():
    with pytest.raises(ValueError):
        encode_offset(0, 1)
    with pytest.raises(ValueError):
        encode_offset(1, -2)
