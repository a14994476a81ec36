"""`vertex-trainer schema` describes the file a user edits: every bundled spec, templates included,
passes a real JSON Schema validator, and mistakes are still caught."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.cli_support import invoke

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted((ROOT / "job_specs").glob("*.yaml"))


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    out = invoke(["schema"], cwd=ROOT)  # in this process (tests/cli_support.py)
    assert out.returncode == 0, out.stderr
    schema = json.loads(out.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", SPECS, ids=[p.name for p in SPECS])
def test_every_bundled_spec_is_valid_in_an_editor(validator, path):
    errors = [e.message for e in validator.iter_errors(yaml.safe_load(path.read_text()))]
    assert errors == []


def test_templates_are_allowed_where_a_pattern_or_number_is_expected(validator):
    spec = yaml.safe_load((ROOT / "job_specs/resnet50-a100x8.yaml").read_text())
    spec["name"] = "run-{{ timestamp }}"
    spec["trainer"]["batch_size"] = "{{ batch }}"
    assert list(validator.iter_errors(spec)) == []


@pytest.mark.parametrize(
    "change,fragment",
    [
        (lambda s: s.update(hardwre="a100x8"), "'hardwre' was unexpected"),
        (lambda s: s.update(name="Not Valid"), "is not valid under any of the given schemas"),
        (lambda s: s["trainer"].update(batch_size="many"), "is not valid under any of the given schemas"),
        (lambda s: s["scheduling"].update(strategy="cheap"), "is not valid under any of the given schemas"),
    ],
)
def test_the_schema_still_catches_mistakes(validator, change, fragment):
    spec = yaml.safe_load((ROOT / "job_specs/resnet50-a100x8.yaml").read_text())
    change(spec)
    messages = [e.message for e in validator.iter_errors(spec)]
    assert any(fragment in m for m in messages), messages
