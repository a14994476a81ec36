"""A careless user's number that YAML 1.1 reads as another number (issue 42, HC round 4).

PyYAML reads YAML 1.1, where a leading zero makes an integer octal and colons make a number
base 60: `num_classes: 010` was 8 classes, `--set trainer.epochs=010` 8 epochs, `batch_size:
0100` 64, `scheduling.timeout: 1:30` 90 seconds (one meant an hour and a half, or a minute and a
half), all without a word. A number whose digits YAML reads so is now refused in a field that
holds a number, naming the field, what was written, what YAML made of it and the fix (exit 2);
a text field keeps the text (test_hostile_careless3_yaml_text.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vertex_trainer.errors import SpecError
from vertex_trainer.spec import load_spec

QUICKSTART = Path(__file__).resolve().parents[2] / "job_specs" / "quickstart-local.yaml"


def spec_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text("name: q\nregion: us-central1\nhardware: cpu\noutput_dir: runs/q\n" + body)
    return path


TRAINER = "trainer: {model: tiny-cnn, train_data: x, num_classes: "


@pytest.mark.parametrize(
    ("body", "field", "said", "fix"),
    [
        (
            TRAINER + "010}\n",
            "trainer.num_classes",
            "010 is 8 in YAML (a leading 0 makes it octal)",
            "write 10",
        ),
        (TRAINER + "10, batch_size: 0100}\n", "trainer.batch_size", "0100 is 64 in YAML", "write 100"),
        (TRAINER + "10}\nscheduling: {timeout: 1:30}\n", "scheduling.timeout", "1:30 is 90 in YAML", "1h30m"),
        (
            TRAINER + "10, learning_rate: 1:30.5}\n",
            "trainer.learning_rate",
            "1:30.5 is 90.5 in YAML",
            "number",
        ),
        (
            TRAINER + "10}\ntune: {parameters: {epochs: {values: [010, 20]}}}\n",
            "tune.parameters.epochs.values[0]",
            "010 is 8",
            "write 10",
        ),
    ],
)
def test_a_number_yaml_reads_otherwise_is_refused_naming_both(tmp_path, body, field, said, fix):
    with pytest.raises(SpecError) as e:
        load_spec(spec_file(tmp_path, body))
    assert e.value.field == field and said in str(e.value)
    assert e.value.hint and fix in e.value.hint


def test_set_is_read_the_same_way(run_cli):
    with pytest.raises(SpecError, match=r"trainer.epochs: 010 is 8 in YAML"):
        load_spec(QUICKSTART, sets=["trainer.epochs=010"])
    proc = run_cli("validate", QUICKSTART, "--local", "--set", "trainer.epochs=010")
    assert proc.returncode == 2 and "trainer.epochs: 010 is 8 in YAML" in proc.stderr
    assert "hint: write 10" in proc.stderr


def test_numbers_that_read_as_written_still_load(tmp_path):
    got = load_spec(
        spec_file(
            tmp_path,
            TRAINER + "1_0, epochs: 07, seed: 00, batch_size: 0x40, learning_rate: 0.10}\n"
            "scheduling: {timeout: 1h30m, max_wait: 5400}\nlabels: {t: 010}\n",
        )
    )
    assert got.trainer is not None
    assert (got.trainer.num_classes, got.trainer.epochs, got.trainer.seed, got.trainer.batch_size) == (
        10,
        7,
        0,
        64,
    )
    assert got.trainer.learning_rate == 0.1 and got.scheduling.timeout == 5400 and got.labels == {"t": "010"}


def test_every_number_yaml_misreads_is_listed_at_once(tmp_path):
    # The refusal stopped at the first: a spec with three such numbers took three runs to fix.
    body = TRAINER + "010, batch_size: 0100}\nscheduling: {timeout: 1:30}\n"
    with pytest.raises(SpecError) as refused:
        load_spec(spec_file(tmp_path, body))
    problems = refused.value.problems
    assert [p.field for p in problems] == ["trainer.num_classes", "trainer.batch_size", "scheduling.timeout"]
    assert [p.hint for p in problems][:2] == ["write 10", "write 100"]
    assert refused.value.message.startswith("3 problems in the spec:")
