"""A careless user writes one item where the spec takes a list (issue 42, H2 round 3):
`requirements: pandas`, `args: --epochs=2`, `--set trainer.extra_args=--foo`.

The refusal (exit 2) said "Input should be a valid tuple (got 'pandas')": pydantic's words for
Python's type, which a YAML file has no such thing as, and no fix. Now it says the field must be
a list and shows the value written as one (`[pandas]`), beside what the field is for."""

from __future__ import annotations

from pathlib import Path

import pytest

from vertex_trainer.errors import SpecError
from vertex_trainer.spec import load_spec

SPEC = Path(__file__).resolve().parents[2] / "job_specs" / "quickstart-local.yaml"


@pytest.mark.parametrize(
    ("assignment", "field", "shown"),
    [
        ("trainer.extra_args=--foo", "trainer.extra_args", "[--foo]"),
        ("image.pip_packages=pandas", "image.pip_packages", "[pandas]"),
    ],
)
def test_one_item_for_a_list_is_told_to_be_a_list(assignment, field, shown):
    with pytest.raises(SpecError) as e:
        load_spec(SPEC, sets=[assignment])
    text = f"{e.value}\n{e.value.hint}"
    assert text.startswith(f"{field}: must be a list, not text (got "), text
    assert f"write it as a list: {shown}" in text and "tuple" not in text


def test_a_number_for_a_list_gets_the_list_shape():
    with pytest.raises(SpecError) as e:
        load_spec(SPEC, sets=["trainer.extra_args=3"])
    assert str(e.value).startswith("trainer.extra_args: must be a list, not a number (got 3)")
    assert "write it as a list: [...]" in (e.value.hint or "")
