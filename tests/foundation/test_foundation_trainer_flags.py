"""One schema for the trainer's flags: the spec's `trainer:` block is generated from the trainer's
own flag table (trainer.flags), so the two cannot drift. No TensorFlow here: the table and the
trainer's parser are stdlib only."""

from __future__ import annotations

import sys

import pytest

from trainer import flags
from trainer.config import parse_flags
from vertex_trainer.errors import SpecError
from vertex_trainer.spec import TrainerArgs, build_spec, check_trainer_flags

SPEC_FIELDS = [name for name in TrainerArgs.model_fields if name != "extra_args"]
# Where the spec is deliberately stricter (or, for model, looser) than the trainer.
SPEC_OWN_RULES = {
    "model",
    "train_data",
    "num_classes",
    "image_size",
    "steps_per_epoch",
    "steps_per_execution",
}


def test_every_spec_flag_is_a_field_and_every_field_a_flag():
    assert SPEC_FIELDS == [f.name for f in flags.FLAGS if f.spec]
    assert {"model_dir", "checkpoint_dir", "tensorboard_dir"}.isdisjoint(SPEC_FIELDS)  # from output_dir
    assert list(TrainerArgs.model_fields)[-1] == "extra_args"


def test_fields_carry_the_flags_help_choices_and_bounds():
    schema = TrainerArgs.model_json_schema()  # the model's own schema (json_schema() adds templates)
    assert set(schema["required"]) == {"train_data", "num_classes"}
    for name in SPEC_FIELDS:
        flag = flags.BY_NAME[name]
        field = TrainerArgs.model_fields[name]
        assert field.description == flag.help, name
        if name in SPEC_OWN_RULES:
            continue
        assert field.default is None, name  # unset -> the trainer's default
        prop = schema["properties"][name]
        options = prop.get("anyOf", [prop])
        if flag.choices:
            assert options[0]["enum"] == list(flag.choices), name
        for bound, key in (
            ("ge", "minimum"),
            ("gt", "exclusiveMinimum"),
            ("le", "maximum"),
            ("lt", "exclusiveMaximum"),
        ):
            assert options[0].get(key) == getattr(flag, bound), (name, bound)


def test_spec_rules_that_differ_from_the_trainer():
    props = TrainerArgs.model_json_schema()["properties"]
    assert (
        props["image_size"]["anyOf"][0]["minimum"] == 8 and props["image_size"]["anyOf"][0]["maximum"] == 1024
    )
    assert props["num_classes"]["minimum"] == 2
    assert "enum" not in props["model"] and props["model"]["default"] == "resnet50"  # another image's models
    assert props["steps_per_epoch"]["anyOf"][0]["minimum"] == 1  # 0 (automatic) = leave it unset


def test_trainer_defaults_are_valid_spec_values(base_spec):
    for name in SPEC_FIELDS:
        flag = flags.BY_NAME[name]
        if flag.default is None or name in ("steps_per_epoch", "steps_per_execution"):
            continue
        spec = build_spec(base_spec, sets=[(f"trainer.{name}", str(flag.default))])
        assert getattr(spec.trainer, name) == flag.default, name


def test_adamw_validates_and_renders(base_spec):
    base_spec["trainer"]["optimizer"] = "adamw"
    spec = build_spec(base_spec)
    assert "--optimizer=adamw" in spec.trainer.to_args()
    base_spec["image"] = {"repository": "us-docker.pkg.dev/p/r/trainer"}
    check_trainer_flags(build_spec(base_spec))  # and the bundled trainer agrees


def _sample(flag: flags.Flag):
    """A valid, non-default value for a flag."""
    if flag.choices:
        return flag.choices[-1] if flag.choices[-1] != flag.default else flag.choices[0]
    if flag.type is bool:
        return not flag.default
    if flag.type is int:
        return max(int(flag.ge or 0), 2) + 2
    if flag.type is float:
        return 0.5 if (flag.le or flag.lt) else 3.0
    return f"gs://my-bucket/{flag.name}-*" if flag.name.endswith("_data") else f"x-{flag.name}"


def test_every_spec_field_round_trips_through_the_trainers_parser(base_spec):
    values = {name: _sample(flags.BY_NAME[name]) for name in SPEC_FIELDS}
    values.update(
        model="tiny-cnn",
        image_size=32,
        batch_size=64,
        steps_per_epoch=8,
        steps_per_execution=4,
        warmup_epochs=1.0,
        epochs=3,
        keras="2",  # 3 is for a model factory only (spec/factory.py), not tiny-cnn
        profile_steps="2,4",  # two step numbers within the run (steps_per_epoch x epochs)
    )
    base_spec["trainer"] = values
    base_spec["image"] = {"repository": "us-docker.pkg.dev/p/r/trainer"}
    spec = build_spec(base_spec)
    check_trainer_flags(spec)
    cfg = parse_flags(
        spec.trainer.to_args(),
        environ={"AIP_MODEL_DIR": "/m", "AIP_CHECKPOINT_DIR": "/c", "AIP_TENSORBOARD_LOG_DIR": "/l"},
    )
    assert {name: getattr(cfg, name) for name in SPEC_FIELDS} == values


def test_to_args_format(base_spec):
    base_spec["trainer"].update(
        {
            "warmup_epochs": 5.0,
            "learning_rate": 0.25,
            "cache": True,
            "deterministic": False,
            "extra_args": ["--foo", "bar"],
        }
    )
    args = build_spec(base_spec).trainer.to_args()
    assert args == [
        "--model=resnet50",
        "--train-data=gs://my-bucket/train-*",
        "--num-classes=1000",
        "--batch-size=2048",
        "--learning-rate=0.25",
        "--warmup-epochs=5",
        "--cache=true",
        "--deterministic=false",
        "--foo",
        "bar",
    ]


@pytest.mark.parametrize(
    "trainer, field, fragment",
    [
        ({"model": "resnet-50"}, "trainer.model", "invalid choice: 'resnet-50'"),
        ({"extra_args": ["--mixed"]}, "trainer.extra_args", "did you mean --seed"),
        ({"extra_args": ["--momentum=x"]}, "trainer.extra_args", "invalid float value"),
        ({"sync_batch_norm": True}, "trainer.sync_batch_norm", "only implemented for tiny-cnn"),
    ],
)
def test_trainer_refusals_name_the_field(base_spec, trainer, field, fragment):
    base_spec["image"] = {"repository": "us-docker.pkg.dev/p/r/trainer"}
    base_spec["trainer"].update(trainer)
    spec = build_spec(base_spec)  # the spec itself is fine
    with pytest.raises(SpecError) as e:
        check_trainer_flags(spec)
    assert e.value.field == field and fragment in e.value.message
    assert "trainer.task --help" in e.value.hint


def test_the_spec_imports_only_the_trainers_flag_table():
    import subprocess

    code = (
        "import sys, vertex_trainer.spec; "
        "print(sorted(m for m in sys.modules if m == 'trainer' or m.startswith(('trainer.', 'tensorflow'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # The flag table and the pure, import-free steps_per_execution choice bench shares (issue 31).
    assert out.stdout.strip() == "['trainer', 'trainer.executions', 'trainer.flags']"
