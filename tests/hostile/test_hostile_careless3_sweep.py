"""A careless user's `bench --sweep` value typed with a character that is a digit to Python but
not a number to int() (issue 42, HC round 4): `--sweep batch_size=256,2²` pasted from a page.

`str.isdigit` is true for superscripts, and the check let `²` through to int(), which raised:
a traceback instead of the refusal every other bad value gets. Only ASCII digits are numbers
here now: exit 2 naming --sweep, the value and the fix; Arabic-Indic digits, which int() would
read, are refused the same way rather than read as another script's number."""

from __future__ import annotations

import pytest

from vertex_trainer.errors import UserError
from vertex_trainer.performance.sweep import parse


@pytest.mark.parametrize("value", ["2²", "²", "٣"])
def test_a_digit_that_is_not_ascii_is_refused_naming_it(value):
    with pytest.raises(UserError) as e:
        parse(f"batch_size=256,{value}")
    assert (
        e.value.message
        == f"--sweep 'batch_size=256,{value}': {value!r} is not a valid batch_size: use positive integers"
    )


def test_ascii_values_read_as_before():
    assert parse("steps_per_execution=1, 08,auto").values == ("1", "8", "auto")


def test_a_duration_with_a_superscript_names_the_forms_not_int():
    """`timeout: 2²` said "invalid literal for int() with base 10: '2²'" (the same isdigit)."""
    from vertex_trainer.durations import parse_duration

    with pytest.raises(ValueError, match=r"invalid duration '2²'; use 90s, 30m, 4h, 2d, 1h30m"):
        parse_duration("2²")
    assert parse_duration("90") == 90
