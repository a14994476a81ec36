"""A careless user's empty --project or --region (issue 42, HC round 4): a CI line
`vertex-trainer submit spec.yaml --region "$REGION"` where REGION is not set.

The flags win over the spec, but an empty one was dropped without a word: the job went to the
spec's region (or gcloud's default) while the line said the region came from the pipeline's
variable. An empty --project or --region is now exit 2 naming the flag; leaving it out keeps
the spec's, as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from vertex_trainer.errors import UserError
from vertex_trainer.spec import load_spec

QUICKSTART = Path(__file__).resolve().parents[2] / "job_specs" / "quickstart-local.yaml"


@pytest.mark.parametrize("flag", ["project", "region"])
def test_an_empty_flag_is_refused_naming_it(run_cli, flag):
    with pytest.raises(UserError) as e:
        load_spec(QUICKSTART, **{flag: " "})
    assert e.value.message == f"--{flag} ' ': empty (a variable that is not set?)"
    proc = run_cli("validate", QUICKSTART, "--local", f"--{flag}", "")
    assert proc.returncode == 2 and f"--{flag} '': empty" in proc.stderr


def test_a_flag_left_out_keeps_the_specs_and_a_given_one_wins():
    assert load_spec(QUICKSTART, region=None).region == "us-central1"
    assert load_spec(QUICKSTART, region="europe-west4", project="other-proj").region == "europe-west4"
