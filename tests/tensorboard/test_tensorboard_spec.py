"""`tensorboard: auto` in the spec: what validate refuses (exit 2 naming the field and the fix,
nothing sent), and the dry run: the instance's find-or-create step and the job's `tensorboard`
field, every request valid against the Vertex AI API's discovery document."""

from __future__ import annotations

import json

import pytest

from tests.discovery_support import conforms, discovery_methods, url_of
from tests.shared import spec_yaml, write_spec
from tests.tensorboard.conftest import PARENT, SA

pytestmark = pytest.mark.wire


@pytest.mark.parametrize(
    "changes, field, words",
    [
        (
            {"tensorboard": "auto"},
            "service_account",
            ["requires a service account", "tensorboard is set (auto)"],
        ),
        (
            {"tensorboard": "auto", "service_account": SA, "output_dir": None},
            "output_dir",
            ["tensorboard (auto) needs output_dir", "gs://BUCKET/PATH"],
        ),
        ({"tensorboard": "automatic", "service_account": SA}, "tensorboard", ["automatic"]),
    ],
    ids=["no-service-account", "no-output-dir", "not-auto"],
)
def test_validate_refuses_auto_without_what_it_needs(fake, run_cli, tmp_path, changes, field, words):
    result = run_cli("validate", write_spec(tmp_path, spec_yaml(**changes)))
    assert result.returncode == 2, result.stdout
    assert field in result.stderr and "Traceback" not in result.stderr
    assert all(w in result.stderr for w in words), result.stderr
    assert fake.requests == []


def test_the_dry_run_lists_the_find_or_create_and_the_jobs_field(fake, run_cli, auto_spec):
    result = run_cli("submit", auto_spec, "--dry-run", "-o", "json", "--idempotency-key", "dry-1")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    (board,) = [c for c in plan["checks"] if c["check"] == "tensorboard"]
    assert board["region"] == "us-central1" and board["label"] == "vertex-trainer-managed=true"
    find, create = board["requests"]
    collection = f"{fake.url}/v1/{PARENT}/tensorboards"
    assert (find["method"], find["url"]) == ("GET", collection)
    assert find["params"] == {"filter": 'labels.vertex-trainer-managed="true"'}
    assert (create["method"], create["url"]) == ("POST", collection)
    assert create["body"]["labels"] == {"vertex-trainer-managed": "true"}
    job = plan["requests"][1]["body"]  # (look, create, look after)
    assert job["jobSpec"]["tensorboard"] == (f"(found or created at submit: {PARENT}/tensorboards/<id>)")
    assert job["jobSpec"]["serviceAccount"] == SA
    found = discovery_methods(["aiplatform.v1"])
    every = [*board["requests"], *plan["requests"]]
    methods = [conforms(r["method"], url_of(r), r.get("body"), found) for r in every]
    assert methods == [
        f"aiplatform.v1: aiplatform.projects.locations.{verb}"
        for verb in (
            "tensorboards.list",
            "tensorboards.create",
            "customJobs.list",
            "customJobs.create",
            "customJobs.list",  # the look after the create
        )
    ]
    assert fake.requests == []  # a dry run sends nothing

    text = run_cli("submit", auto_spec, "--dry-run", "--idempotency-key", "dry-1")
    assert text.returncode == 0, text.stderr
    assert "1. find or create the TensorBoard instance (tensorboard: auto)" in text.stdout
    assert f"GET {collection}?filter=labels.vertex-trainer-managed%3D%22true%22" in text.stdout
    assert "(found or created at submit:" in text.stdout
    shown = run_cli("validate", auto_spec)
    assert shown.returncode == 0, shown.stderr
    assert (
        "tensorboard auto: the instance labelled vertex-trainer-managed=true in us-central1" in shown.stdout
    )
    assert fake.requests == []


def test_the_checker_refuses_a_tensorboard_request_google_would_refuse():
    """The discovery check above can fail: an unknown body field, a wrong verb, an id parameter
    the create does not take."""
    found = discovery_methods(["aiplatform.v1"])
    url = f"http://127.0.0.1:1/v1/{PARENT}/tensorboards"
    assert conforms("POST", url, {"displayName": "x"}, found)
    assert conforms("POST", url, {"displayName": "x", "runs": 1}, found) is None
    assert conforms("PUT", url, {"displayName": "x"}, found) is None
    assert conforms("POST", url + "?tensorboardId=x", {"displayName": "x"}, found) is None
