"""A careless user's true/false where a number goes (issue 42, HC round 4).

pydantic's lax mode takes a boolean for a number: `--set trainer.epochs=true` (or in a file
`epochs: true`, `batch_size: yes`: YAML 1.1 reads yes/on as true) trained 1 epoch with a batch
of 1, `learning_rate: true` a learning rate of 1.0, `replicas: on` one machine, all with exit 0
and not a word. A field that holds a number now refuses true/false: one message naming the
field, the value and the fix, exit 2. Numbers written any way YAML or text allows still load."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.shared import T4_JOB, merged
from vertex_trainer.errors import SpecError
from vertex_trainer.spec import build_spec, load_spec

QUICKSTART = Path(__file__).resolve().parents[2] / "job_specs" / "quickstart-local.yaml"
TRAINER = "trainer: {model: tiny-cnn, train_data: x, num_classes: 10, "


def spec_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text("name: q\nregion: us-central1\nhardware: cpu\noutput_dir: runs/q\n" + body)
    return path


@pytest.mark.parametrize(
    ("written", "field"),
    [
        ("epochs: true}", "trainer.epochs"),
        ("batch_size: yes}", "trainer.batch_size"),
        ("learning_rate: true}", "trainer.learning_rate"),
        ("warmup_epochs: on}", "trainer.warmup_epochs"),
        ("steps_per_execution: true}", "trainer.steps_per_execution"),
        ("epochs: 3}\nreplicas: on", "replicas"),
        ("epochs: 3}\nboot_disk: {size_gb: yes}", "boot_disk.size_gb"),
        ("epochs: 3}\nscheduling: {max_cost: true}", "scheduling.max_cost"),
    ],
)
def test_true_or_false_for_a_number_in_a_file_is_refused_naming_the_field(tmp_path, written, field):
    with pytest.raises(SpecError) as e:
        load_spec(spec_file(tmp_path, TRAINER + written + "\n"))
    assert e.value.field == field
    assert f"{field}: must be a number, not true/false (got true)" in str(e.value)
    assert e.value.hint and "yes/no" in e.value.hint


@pytest.mark.parametrize(
    "setting", ["trainer.epochs=true", "trainer.batch_size=yes", "trainer.learning_rate=on"]
)
def test_true_or_false_for_a_number_in_set_is_refused(setting):
    with pytest.raises(SpecError, match=r"must be a number, not true/false \(got true\)"):
        load_spec(QUICKSTART, sets=[setting])


def test_the_cli_says_so_with_exit_2(run_cli):
    proc = run_cli("validate", QUICKSTART, "--local", "--set", "trainer.epochs=true")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "trainer.epochs: must be a number, not true/false (got true)" in proc.stderr


def test_the_blocks_refuse_it_too():
    bad = [
        {"tune": {"parameters": {"learning_rate": {"min": True, "max": 1.0}}}},
        {"deploy": {"traffic": True}},
        {"hardware": "a100x8", "replicas": 2, "scaling": {"reduction_server": True}},
    ]
    for change in bad:
        with pytest.raises(SpecError, match="must be a number, not true/false"):
            build_spec(merged(T4_JOB, change))


def test_numbers_written_any_other_way_still_load(tmp_path):
    got = load_spec(
        spec_file(
            tmp_path,
            TRAINER + "epochs: 3.0, batch_size: '64', learning_rate: 1e-3, warmup_epochs: 1.0e-1,\n"
            "          skip_corrupt: yes, momentum: '0.8'}\nfixed_output_dir: on\n",
        )
    )
    assert got.trainer is not None and got.fixed_output_dir is True and got.trainer.skip_corrupt is True
    assert (got.trainer.epochs, got.trainer.batch_size) == (3, 64)
    assert (got.trainer.learning_rate, got.trainer.warmup_epochs, got.trainer.momentum) == (0.001, 0.1, 0.8)
    assert load_spec(QUICKSTART, sets=["trainer.learning_rate=5e-2"]).trainer.learning_rate == 0.05


def test_true_and_false_still_tune_a_boolean_flag():
    data = yaml.safe_load(QUICKSTART.read_text())
    data["output_dir"] = "gs://bkt/runs"
    data["tune"] = {"parameters": {"skip_corrupt": {"values": [True, False]}}}
    assert build_spec(data).tune is not None
