"""What a new user trips on in the first hour (issue 15), each checked at its root."""

from __future__ import annotations

import pytest

from vertex_trainer import api
from vertex_trainer.errors import UserError
from vertex_trainer.preflight import check_stand_ins, registry_far
from vertex_trainer.settings import Settings
from vertex_trainer.spec import build_spec
from vertex_trainer.spec.attempts import attempts
from vertex_trainer.vertex.names import check_key


def _spec(region="us-central1", **image):
    return build_spec(
        {
            "name": "first-hour",
            "project": "test-project",
            "region": region,
            "hardware": "cpu",
            "image": image or {"repository": "us-central1-docker.pkg.dev/test-project/r/trainer"},
            "output_dir": "gs://out-bucket/runs/x",
            "trainer": {"train_data": "gs://data-bucket/train-*", "num_classes": 10, "model": "tiny-cnn"},
        }
    )


@pytest.mark.parametrize("key", ["cb-", "gh_", "cb-${COMMIT_SHA}", "$GITHUB_RUN_ID"])
def test_keys_that_look_like_unexpanded_variables_are_refused(key):
    with pytest.raises(UserError) as err:
        check_key(key)
    assert err.value.exit_code == 2
    assert "variable" in str(err.value)


def test_a_real_key_passes():
    assert check_key("cb-build-42") == "cb-build-42"


def test_offline_vertex_with_a_real_registry_names_the_missing_stand_ins():
    offline = Settings(vertex_endpoint="http://127.0.0.1:1")
    with pytest.raises(UserError) as err:
        check_stand_ins(_spec(), offline)
    text = str(err.value)
    for name in (
        "VERTEX_TRAINER_REGISTRY_ENDPOINT",
        "VERTEX_TRAINER_CLOUDBUILD_ENDPOINT",
        "STORAGE_EMULATOR_HOST",
    ):
        assert name in text
    assert "image.uri" in err.value.hint
    # Every stand-in there: nothing to say. An existing image needs none of them.
    check_stand_ins(
        _spec(),
        Settings(
            vertex_endpoint="http://x",
            registry_endpoint="http://r",
            cloudbuild_endpoint="http://c",
            storage_emulator="http://s",
        ),
    )
    check_stand_ins(_spec(uri="us-docker.pkg.dev/p/r/t:v1"), offline)


def test_the_offline_submit_stops_before_anything_is_sent(fake):
    offline = Settings(vertex_endpoint=fake.url)
    with pytest.raises(UserError, match="VERTEX_TRAINER_REGISTRY_ENDPOINT"):
        api.submit(_spec(), settings=offline, log=lambda _: None)
    assert fake.connections == 0


@pytest.mark.parametrize(
    "region,image,far",
    [
        ("us-central1", {"repository": "us-central1-docker.pkg.dev/p/r/t"}, False),
        ("europe-west4", {"repository": "us-central1-docker.pkg.dev/p/r/t"}, True),
        ("us-east1", {"uri": "us-docker.pkg.dev/p/r/t:v1"}, False),
        ("europe-west4", {"uri": "us-docker.pkg.dev/p/r/t:v1"}, True),
        ("europe-west4", {"uri": "europe-docker.pkg.dev/p/r/t:v1"}, False),
        ("europe-west4", {"uri": "docker.io/library/python:3.11"}, False),  # not Artifact Registry
    ],
)
def test_a_repository_far_from_the_job_warns(region, image, far):
    spec = _spec(region=region, **image)
    warning = registry_far(spec, attempts(spec))
    assert (warning is not None) is far
    if far:
        assert f"the job runs in {region}" in warning


def test_local_job_and_dry_run_read_well_in_a_notebook(tmp_path):
    from vertex_trainer.api import DryRun, LocalJob
    from vertex_trainer.local import LocalResult

    result = LocalResult(
        name="local-1",
        state="JOB_STATE_SUCCEEDED",
        output_dir=tmp_path,
        model_dir=str(tmp_path / "model"),
        metrics={"eval_accuracy": 0.9},
        exit_code=0,
    )
    job = LocalJob(result, {}, None, "vt-1")
    assert job.output_dir == str(tmp_path) and job.metrics == {"eval_accuracy": 0.9}
    assert repr(job) == f"LocalJob(name='local-1', state='JOB_STATE_SUCCEEDED', output_dir={str(tmp_path)!r})"
    plan = DryRun({"jobSpec": {"x": "y" * 10_000}}, [{"method": "GET"}, {"method": "POST"}], "img", "vt-2")
    assert len(repr(plan)) < 200 and "requests=[GET, POST]" in repr(plan)
