"""A careless user's `--set` on a field that holds text (issue 42, H2 round 3): a label, an
environment variable, a path.

`--set` reads its value as a YAML scalar (`4096` a number, `true` a boolean), and the spec turned
a label's or an env variable's number or boolean back into text: `--set labels.env=no` became the
label `env: false`, `--set labels.run=007` the label `run: 7`, `--set env.VERSION=1.10` the
variable `VERSION=1.1`, all without a word (and `--set labels.version=1.10` was refused naming
'1.1', a value never typed). A field that holds text now takes the text as typed; the fields that
hold numbers and booleans read YAML as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from vertex_trainer.errors import UserError
from vertex_trainer.spec import load_spec

SPEC = Path(__file__).resolve().parents[2] / "job_specs" / "quickstart-local.yaml"


def spec(*sets: str):
    return load_spec(SPEC, sets=sets)


@pytest.mark.parametrize(
    ("typed", "kept"),
    [("no", "no"), ("007", "007"), ("1_000", "1_000"), ("0x10", "0x10"), ("on", "on"), ("1e3", "1e3")],
)
def test_a_label_takes_the_text_as_typed(typed, kept):
    assert spec(f"labels.run={typed}").labels["run"] == kept


@pytest.mark.parametrize("typed", ["1.10", "no", "007", "true", "3.0"])
def test_an_env_variable_takes_the_text_as_typed(typed):
    assert spec(f"env.VERSION={typed}").env["VERSION"] == typed


def test_a_refused_label_names_the_value_as_typed():
    with pytest.raises(UserError) as e:
        spec("labels.version=1.10")
    assert "(got '1.10')" in str(e.value) and "'1.1'" not in str(e.value)


def test_text_fields_of_nested_sections_keep_the_text_too():
    got = spec("trainer.train_data=2024", "output_dir=007")
    assert got.trainer is not None and got.trainer.train_data == "2024"
    assert got.output_dir == "007"


def test_number_and_boolean_fields_still_read_yaml():
    got = spec("trainer.epochs=5", "replicas=2", "fixed_output_dir=yes", "trainer.learning_rate=0.2")
    assert got.trainer is not None
    assert (got.trainer.epochs, got.replicas, got.fixed_output_dir) == (5, 2, True)
    assert got.trainer.learning_rate == 0.2


def test_null_removes_a_label_or_an_env_variable_as_documented():
    """README: "`null` removes a value". On a label or an env variable it was refused instead
    ("labels.purpose: Input should be a valid string (got None)"), and on a field with a default
    (replicas, boot_disk, labels itself) "must be ..., not empty"."""
    got = spec("labels.purpose=null", "env.TF_CPP_MIN_LOG_LEVEL=null")
    assert "purpose" not in got.labels and "TF_CPP_MIN_LOG_LEVEL" not in got.env
    got = spec("replicas=null", "boot_disk=null", "labels=null", "labels.other=null")
    assert got.replicas == 1 and got.boot_disk.size_gb == 100 and got.labels == {}


OWN_CODE = {
    "name": "own",
    "region": "us-central1",
    "hardware": "cpu",
    "image": {"code": ".", "script": "task.py"},
    "output_dir": "runs",
    "args": ["--epochs=1", "--steps-per-epoch=2"],
}


@pytest.mark.parametrize("key", ["args[1]", "args.1"])
def test_setting_one_item_of_a_list_hands_the_whole_list_back(key):
    """`--set args[1]=--steps-per-epoch=9` said "args[1]: unknown key; did you mean 'args'?" (and
    `args.1`: "args is [...], not a mapping"): --set replaces whole fields. The refusal now hands
    the whole list back with that item replaced, ready to paste."""
    from vertex_trainer.spec import build_spec

    with pytest.raises(UserError) as e:
        build_spec(OWN_CODE, sets=[f"{key}=--steps-per-epoch=9"])
    assert str(e.value).startswith(f"--set {key}: args is a list, and --set replaces a whole field")
    assert e.value.hint == """--set 'args=["--epochs=1", "--steps-per-epoch=9"]'"""
    with pytest.raises(UserError) as e:
        build_spec(OWN_CODE, sets=["args[2]=--db-password=hunter2"])  # one more, its secret masked
    assert e.value.hint == """--set 'args=["--epochs=1", "--steps-per-epoch=2", "--db-password=***"]'"""
