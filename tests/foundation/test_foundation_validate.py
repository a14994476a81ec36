"""validate answers what submit answers (issue 24 items 1 and 4): the same checks for a cloud
submit unless --local, the same warnings, a misspelt region stopped at both, and max_wait with a
strategy that does not wait is a warning, not an error."""

from __future__ import annotations

import json

from vertex_trainer import render
from vertex_trainer.spec import build_spec
from vertex_trainer.spec.rules import warnings

IGNORED = "warning: scheduling.max_wait is ignored: it applies to flex-start, and the strategy is 'spot'"


def test_a_local_spec_is_checked_for_the_cloud_unless_local(cli):
    submit = cli("submit", "job_specs/quickstart-local.yaml", "--dry-run")
    validate = cli("validate", "job_specs/quickstart-local.yaml")
    assert submit.code == validate.code == 2
    assert validate.err == submit.err and "output_dir: must be a gs:// path" in validate.err
    local = cli(
        "validate",
        "job_specs/quickstart-local.yaml",
        "--local",
        "--set",
        "trainer.train_data=job_specs/*.yaml",
        "--set",
        "trainer.eval_data=null",
    )
    assert local.code == 0, local.err
    assert local.out.startswith("OK  job_specs/quickstart-local.yaml") and "(for --local)" in local.out


def test_a_misspelt_region_is_exit_2_with_the_nearest_at_validate_and_submit(cli, base_spec, write_spec):
    base_spec["region"] = "us-central9"
    path = write_spec(base_spec)
    for args in (("validate", path), ("submit", path, "--dry-run"), ("validate", path, "--local")):
        result = cli(*args)
        assert result.code == 2 and result.out == "", result.out
        assert result.err.startswith("error: region: 'us-central9' is not a Vertex AI training region")
        assert "did you mean 'us-central1'" in result.err and "Traceback" not in result.err


def test_switching_a_flex_spec_to_spot_ignores_max_wait_with_a_warning(cli):
    args = (
        "job_specs/resnet50-h100x8-flex.yaml",
        "--set",
        "scheduling.strategy=spot",
        "--set",
        "trainer.batch_size=4096",
        "--var",
        "run=7",
    )
    validate = cli("validate", *args)
    assert validate.code == 0, validate.err
    assert IGNORED in validate.err
    assert "  schedule  spot, max wait 4h (ignored: no flex-start in the plan)" in validate.out
    submit = cli("submit", *args, "--dry-run", "--output", "json")
    assert submit.code == 0, submit.err
    assert IGNORED in submit.err
    assert "maxWaitDuration" not in json.dumps(json.loads(submit.out))


def test_max_wait_keeps_its_meaning_for_a_flex_start_fallback(base_spec):
    base_spec["hardware"] = "h100x8"
    base_spec["trainer"]["batch_size"] = 2048
    base_spec["scheduling"] = {"strategy": "spot", "max_wait": "2h", "fallback": ["flex-start"]}
    spec = build_spec(base_spec)
    assert warnings(spec) == []
    assert render.scheduling(spec, "flex-start")["maxWaitDuration"] == "7200s"
    assert "maxWaitDuration" not in render.scheduling(spec, "spot")
    base_spec["scheduling"]["fallback"] = ["standard"]
    assert [w.split(" (")[0] for w in warnings(build_spec(base_spec))] == [IGNORED]


def test_the_far_image_warning_appears_at_validate_too(cli, base_spec, write_spec):
    base_spec["region"] = "europe-west4"
    base_spec["image"] = {"uri": "us-central1-docker.pkg.dev/my-project/training/trainer:v1"}
    path = write_spec(base_spec)
    validate, submit = cli("validate", path), cli("submit", path, "--dry-run")
    assert validate.code == 0 and submit.code == 0, validate.err + submit.err
    far = "warning: image.uri is in us-central1, the job runs in europe-west4"
    assert far in validate.err and far in submit.err
