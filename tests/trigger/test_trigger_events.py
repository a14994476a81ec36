"""Which storage events start a run, and under which key (pure: no server)."""

from __future__ import annotations

import pytest

from vertex_trainer.automation import (
    FINALIZED,
    BadEvent,
    ObjectEvent,
    TriggerConfig,
    check_trigger_args,
    decide,
    event_key,
)
from vertex_trainer.errors import UserError

CONFIG = TriggerConfig(bucket="data-bucket", prefix="datasets/", marker="_SUCCESS")


def event(
    name: str, generation: str = "7", bucket: str = "data-bucket", type: str = FINALIZED
) -> ObjectEvent:
    return ObjectEvent.from_cloud_event(
        {
            "attributes": {"id": "1", "type": type, "subject": f"objects/{name}"},
            "data": {"bucket": bucket, "name": name, "generation": generation},
        }
    )


@pytest.mark.parametrize(
    "name, folder",
    [
        ("datasets/mnist/_SUCCESS", "mnist"),
        ("datasets/2026/11/mnist/_SUCCESS", "2026/11/mnist"),
    ],
)
def test_a_marker_under_the_prefix_starts_a_run_for_its_folder(name, folder):
    decision = decide(CONFIG, event(name))
    assert decision.starts_run and decision.folder == folder
    assert decision.template_vars() == {
        "bucket": "data-bucket",
        "object": name,
        "generation": "7",
        "folder": f"gs://data-bucket/datasets/{folder}",
        "folder_name": folder,
    }


@pytest.mark.parametrize(
    "name, reason",
    [
        ("datasets/mnist/train-00000-of-00002", "not a _SUCCESS marker"),
        ("datasets/mnist/_SUCCESS.tmp", "not a _SUCCESS marker"),
        ("other/mnist/_SUCCESS", "outside the prefix"),
        ("datasets/_SUCCESS", "names no folder"),
    ],
)
def test_everything_else_is_ignored_with_a_reason(name, reason):
    decision = decide(CONFIG, event(name))
    assert not decision.starts_run and reason in decision.reason


def test_other_buckets_and_event_types_are_ignored():
    assert "bucket" in decide(CONFIG, event("datasets/a/_SUCCESS", bucket="b-bucket")).reason
    deleted = event("datasets/a/_SUCCESS", type="google.cloud.storage.object.v1.deleted")
    assert "event type" in decide(CONFIG, deleted).reason


def test_the_key_depends_on_bucket_object_and_generation_only():
    key = event_key("data-bucket", "datasets/a/_SUCCESS", "7")
    assert key == decide(CONFIG, event("datasets/a/_SUCCESS")).key
    assert key != event_key("data-bucket", "datasets/a/_SUCCESS", "8")
    assert key != event_key("data-bucket", "datasets/b/_SUCCESS", "7")
    assert key.startswith("ev-") and len(key) <= 63 and key == key.lower()


def test_the_object_can_come_from_the_subject_and_the_bucket_from_the_attributes():
    found = ObjectEvent.from_cloud_event(
        {
            "attributes": {"subject": "objects/datasets/x/_SUCCESS", "bucket": "data-bucket"},
            "data": b'{"generation": "5"}',
        }
    )
    assert (found.bucket, found.name, found.generation) == ("data-bucket", "datasets/x/_SUCCESS", "5")


@pytest.mark.parametrize(
    "data", [None, b"not json", {"name": "a"}, {"bucket": "b", "name": "a", "generation": "x"}]
)
def test_an_event_without_an_object_is_a_bad_event(data):
    with pytest.raises(BadEvent):
        ObjectEvent.from_cloud_event({"attributes": {}, "data": data})


@pytest.mark.parametrize(
    "bucket, prefix, marker, message",
    [
        ("gs://data-bucket", "", "_SUCCESS", "without gs://"),
        ("Data_Bucket!", "", "_SUCCESS", "not a bucket name"),
        ("data-bucket", "/datasets/", "_SUCCESS", "no leading"),
        ("data-bucket", "", "done/_SUCCESS", "last name part"),
        ("data-bucket", "", "", "last name part"),
    ],
)
def test_bad_trigger_flags_are_exit_2(bucket, prefix, marker, message):
    with pytest.raises(UserError, match=message):
        check_trigger_args(bucket, prefix, marker)


def test_the_deploy_plan_runs_in_order_with_captured_values_and_stops_at_a_failure():
    import subprocess

    from vertex_trainer.automation import gcloud_commands as gcloud
    from vertex_trainer.errors import ServiceError

    deployment = gcloud.Deployment(
        function="vt-digits",
        project="test-project",
        region="us-central1",
        trigger_location="us",
        bucket="data-bucket",
        source="/tmp/fn",
        runtime_sa=gcloud.service_account("test-project", "run", "digits"),
        trigger_sa=gcloud.service_account("test-project", "evt", "digits"),
        job_sa=None,
        read_buckets=("data-bucket",),
        pipeline=False,
    )
    ran: list[list[str]] = []

    def runner(argv, **_):
        ran.append(argv)
        exists = argv[:4] == ["gcloud", "iam", "service-accounts", "describe"] and "vt-evt" in argv[4]
        out = "service-123@gs-project-accounts.iam.gserviceaccount.com\n" if "service-agent" in argv else ""
        return subprocess.CompletedProcess(
            argv, 0 if exists or argv[1] != "iam" or argv[3] != "describe" else 1, stdout=out, stderr=""
        )

    gcloud.run(gcloud.plan(deployment), log=lambda _: None, runner=runner)
    publisher = next(a for a in ran if "--role=roles/pubsub.publisher" in a)
    assert "--member=serviceAccount:service-123@gs-project-accounts.iam.gserviceaccount.com" in publisher
    created = [a[4] for a in ran if a[:4] == ["gcloud", "iam", "service-accounts", "create"]]
    assert created == [deployment.runtime_sa.split("@")[0]]  # the trigger SA existed already
    assert ran[-2][:3] == ["gcloud", "functions", "deploy"] and ran[-1][2] == "add-invoker-policy-binding"
    assert all(len(sa.split("@")[0]) <= 30 for sa in (deployment.runtime_sa, deployment.trigger_sa))

    def failing(argv, **_):
        return subprocess.CompletedProcess(argv, 1, stdout="", stderr="PERMISSION_DENIED: nope")

    with pytest.raises(ServiceError, match="PERMISSION_DENIED"):
        gcloud.run(gcloud.plan(deployment), log=lambda _: None, runner=failing)
