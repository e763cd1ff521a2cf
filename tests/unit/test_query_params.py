"""Integer parameters: what is not a bounded decimal integer is a Problem naming it."""

import pytest

from app.api.params import MAX_OFFSET, int_param
from app.problems import Problem


@pytest.mark.parametrize(("raw", "value"), [(None, 7), ("", 7), ("0", 0), ("42", 42),
                                            (str(MAX_OFFSET), MAX_OFFSET)])
def test_integers_within_bounds_are_taken(raw, value):
    source = {} if raw is None else {"n": raw}
    assert int_param("n", 7, 0, MAX_OFFSET, source=source) == value


@pytest.mark.parametrize("raw", ["-1", str(MAX_OFFSET + 1), "1_0", "+5", " 5", "\u0665", "1.0",
                                 "9" * 5000])
def test_anything_else_is_a_problem_naming_the_parameter(raw):
    with pytest.raises(Problem) as refused:
        int_param("n", 7, 0, MAX_OFFSET, status=422, source={"n": raw})
    assert refused.value.status == 422
    assert refused.value.detail.startswith(f"'n' must be an integer between 0 and {MAX_OFFSET}")


def test_unbounded_parameters_take_at_most_19_digits():
    """int() of more than 4,300 digits raises ValueError: it was a 500."""
    assert int_param("n", 1, 1, source={"n": "9" * 19}) == 10**19 - 1
    with pytest.raises(Problem, match="of at most 19 digits"):
        int_param("n", 1, 1, source={"n": "9" * 5000})
