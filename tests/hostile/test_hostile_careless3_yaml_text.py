"""A careless user's spec file whose text values YAML 1.1 reads as numbers or booleans (issue 42,
HC round 4).

PyYAML reads YAML 1.1: `no`, `on`, `yes` are booleans, `010` is the octal 8, `1.10` the float
1.1, `1_000` the int 1000. The spec then wrote a text field's value back from that: `labels:
{env: no}` was the label "false", `labels: {run: 010}` the label "8", `env: {FLAG: on}` the variable
FLAG=true, `env: {VERSION: 1.10}` VERSION=1.1; `args: [--lr, 1.0e-3]`, `name: 010` and
`trainer.jit_compile: true` (a choice of the words auto, true, false) were refused. `--set` kept
the text since 3be0cfe; the file did not. A field that holds text now takes the scalar as
written; the fields that hold numbers and booleans read YAML as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.cli_support import edge_env
from tests.shared import T4_JOB, cli_runner, spec_yaml, write_spec
from vertex_trainer.errors import UserError
from vertex_trainer.spec import apply_set, load_spec, read_yaml

TRAINER = "trainer: {model: tiny-cnn, train_data: data/x-*, num_classes: 10}\n"


def spec_file(tmp_path, body: str):
    head = "name: q\nregion: us-central1\nhardware: cpu\noutput_dir: runs/q\n"
    return write_spec(tmp_path, head + body)


def test_labels_and_env_take_the_text_as_written(tmp_path):
    got = load_spec(
        spec_file(
            tmp_path,
            TRAINER + "labels: {env: no, run: 010, tier: 1_000, hex: 0x1f, o: on}\n"
            "env: {FLAG: on, VERSION: 1.10, N: 1_000, BIG: 1.0e+3, INF: .inf, MODE: Off}\n",
        )
    )
    assert got.labels == {"env": "no", "run": "010", "tier": "1_000", "hex": "0x1f", "o": "on"}
    assert got.env == {
        "FLAG": "on",
        "VERSION": "1.10",
        "N": "1_000",
        "BIG": "1.0e+3",
        "INF": ".inf",
        "MODE": "Off",
    }


def test_lists_of_text_names_paths_and_word_choices_take_the_text_too(tmp_path):
    script = spec_file(
        tmp_path, "image: {code: ., script: task.py}\nargs: [--lr, 1.0e-3, --flag, off, '--n', 010]\n"
    )
    assert load_spec(script).args == ("--lr", "1.0e-3", "--flag", "off", "--n", "010")
    got = load_spec(
        write_spec(
            tmp_path,
            "name: 2024\nregion: us-central1\nhardware: cpu\noutput_dir: 007\n"
            "trainer: {model: tiny-cnn, train_data: 2024, num_classes: 10, jit_compile: true,\n"
            "          extra_args: [--x, 1.10, yes]}\n",
            "other.yaml",
        )
    )
    assert (got.name, got.output_dir) == ("2024", "007")
    assert got.trainer is not None and got.trainer.train_data == "2024"
    assert got.trainer.jit_compile == "true" and got.trainer.extra_args == ("--x", "1.10", "yes")
    assert "--jit-compile=true" in got.trainer.to_args()


def test_number_and_boolean_fields_still_read_yaml(tmp_path):
    got = load_spec(
        spec_file(
            tmp_path,
            "trainer: {model: tiny-cnn, train_data: x, num_classes: 1_0, epochs: 3, learning_rate: 1e-3,\n"
            "          warmup_epochs: 1.5, skip_corrupt: yes}\nfixed_output_dir: on\n",
        )
    )
    assert got.trainer is not None and got.fixed_output_dir is True
    assert (got.trainer.num_classes, got.trainer.epochs, got.trainer.skip_corrupt) == (10, 3, True)
    assert (got.trainer.learning_rate, got.trainer.warmup_epochs) == (0.001, 1.5)


def test_one_alias_is_text_in_a_text_field_and_a_number_in_a_number_field(tmp_path):
    got = load_spec(
        spec_file(
            tmp_path, "labels: {run: &n 12}\ntrainer: {model: tiny-cnn, train_data: x, num_classes: *n}\n"
        )
    )
    assert got.labels == {"run": "12"} and got.trainer is not None and got.trainer.num_classes == 12


def test_read_yaml_hands_the_text_back(tmp_path):
    data = read_yaml(spec_file(tmp_path, TRAINER + "labels: {env: no}\nreplicas: 2\n"))
    assert data["labels"] == {"env": "no"} and data["replicas"] == 2


def test_the_rendered_job_carries_the_text_as_written(tmp_path):
    spec = write_spec(
        tmp_path, spec_yaml(T4_JOB) + "labels: {env: no, run: 010}\nenv: {FLAG: on, VERSION: 1.10}\n"
    )
    done = cli_runner(edge_env(tmp_path), cwd=tmp_path)("render", spec)
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout)
    assert job["labels"]["env"] == "no" and job["labels"]["run"] == "010"
    env = {e["name"]: e["value"] for e in job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["env"]}
    assert env["FLAG"] == "on" and env["VERSION"] == "1.10"
    assert yaml.safe_load(spec.read_text())["labels"]["env"] is False  # (what YAML 1.1 reads there)


def test_a_study_tries_the_words_a_text_flag_takes_as_written(tmp_path):
    """`tune.parameters.jit_compile.values: [true, false]` (the flag's words auto, true, false)
    was refused: "True is not a valid trainer.jit_compile". A value a study tries is text where
    the trainer field holds text; numbers and booleans of other fields read as before."""
    got = load_spec(
        spec_file(
            tmp_path,
            "trainer: {model: tiny-cnn, train_data: x, eval_data: y, num_classes: 10}\n"
            "tune: {parameters: {jit_compile: {values: [true, false]}, keras: {values: [2, 3]},\n"
            "       epochs: {values: [1, 2]}, skip_corrupt: {values: [yes, no]}}}\n",
        )
    )
    assert got.tune is not None
    values = {name: p.values for name, p in got.tune.parameters.items()}
    assert values == {
        "jit_compile": ("true", "false"),
        "keras": ("2", "3"),
        "epochs": (1, 2),
        "skip_corrupt": (True, False),
    }
    via_set = load_spec(
        spec_file(tmp_path, TRAINER),
        sets=["trainer.eval_data=y", "tune.parameters.jit_compile.values=[true, false]"],
    )
    assert via_set.tune is not None and via_set.tune.parameters["jit_compile"].values == ("true", "false")


def test_set_below_a_number_names_the_number_as_written():
    quickstart = Path(__file__).resolve().parents[2] / "job_specs" / "quickstart-local.yaml"
    with pytest.raises(UserError) as e:
        load_spec(quickstart, sets=["hardware=8", "hardware.accelerator_count=1"])
    assert e.value.message == "--set hardware.accelerator_count: hardware is 8, not a mapping"


def test_apply_set_leaves_plain_values_of_the_fields_types():
    data: dict = {}
    for key, raw in (("labels.env", "no"), ("replicas", "2"), ("args", "[--lr, 1.10]"), ("env", "{A: on}")):
        apply_set(data, key, raw)
    assert data == {"labels": {"env": "no"}, "replicas": 2, "args": ["--lr", "1.10"], "env": {"A": "on"}}
    assert type(data["replicas"]) is int


def test_the_list_handed_back_by_set_holds_its_items_as_written():
    quickstart = Path(__file__).resolve().parents[2] / "job_specs" / "quickstart-local.yaml"
    own = ["image=null", "trainer=null", "image.code=.", "image.script=task.py"]
    with pytest.raises(UserError) as e:
        load_spec(quickstart, sets=[*own, "args=[--lr, 010, 5]", "args[1]=x"])
    assert e.value.hint == """--set 'args=["--lr", "x", "5"]'"""


@pytest.mark.parametrize(
    ("merged", "kind"),
    [("{1: x}", "the number 1"), ("{1.10: x}", "the number 1.1"), ("{no: x}", "false (yes/no/on/off")],
)
def test_a_key_a_merge_brings_in_is_named_as_yaml_read_it(tmp_path, merged, kind):
    # A merged mapping's keys are not the mapping's own (`<<:` is skipped by the duplicate check),
    # so a number key came through as the loader's holder: 'a key must be text, not a _Written'.
    with pytest.raises(UserError) as refused:
        read_yaml(spec_file(tmp_path, TRAINER + f"labels:\n  <<: {merged}\n"))
    assert f"labels: a key must be text, not {kind}" in refused.value.message
    assert "_Written" not in refused.value.message
    assert refused.value.hint == "quote the key"
