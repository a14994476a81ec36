"""The rendered function, served by the real functions-framework and fed the CloudEvents Eventarc
sends, against the fake Vertex AI: which objects start runs, exactly once (docs/contract.md section 6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.trigger.conftest import (
    BUCKET,
    DEPLOY,
    SPEC,
    function_env,
    send_event,
    served,
    write_spec,
)
from vertex_trainer import api
from vertex_trainer.automation import event_key
from vertex_trainer.contract import run_name
from vertex_trainer.settings import Settings

pytestmark = [pytest.mark.wire, pytest.mark.timeout(180)]


def _render(root: Path, spec_text: str) -> Path:
    out = root / "function"
    api.trigger_render(
        write_spec(root / "spec", spec_text),
        out,
        bucket=BUCKET,
        prefix="datasets/",
        settings=Settings(),
        log=lambda _: None,
    )
    return out


@pytest.fixture(scope="module")
def job_function(tmp_path_factory, fake):
    root = tmp_path_factory.mktemp("job-fn")
    spec = SPEC.replace(
        "labels: {team: vision}", 'labels: {team: vision, dataset: "{{ trigger.folder_name }}"}'
    )
    out = _render(root, spec)
    with served(out, function_env(fake.url, root)) as (url, lines, _errors):
        yield url, lines, out


@pytest.fixture(scope="module")
def pipeline_function(tmp_path_factory, fake):
    root = tmp_path_factory.mktemp("pipeline-fn")
    out = _render(root, SPEC + DEPLOY)
    with served(out, function_env(fake.url, root)) as (url, lines, _errors):
        yield url, lines, out


def _jobs_reading(fake, folder: str) -> list[dict]:
    wanted = f"--train-data=gs://{BUCKET}/datasets/{folder}/train-*"
    return [
        j for j in fake.jobs.values() if wanted in j["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"]
    ]


def test_six_events_start_exactly_two_runs_each_reading_the_markers_folder(fake, job_function):
    url, lines, _ = job_function
    events = [
        ("datasets/mnist/train-00000-of-00002", 101, "e1"),  # a shard: ignored
        ("datasets/mnist/train-00001-of-00002", 102, "e2"),  # a shard: ignored
        ("datasets/mnist/_SUCCESS", 103, "e3"),  # the marker: a run
        ("datasets/mnist/_SUCCESS", 103, "e3-again"),  # redelivered (another event id): nothing
        ("elsewhere/mnist/_SUCCESS", 104, "e4"),  # a marker outside the prefix: ignored
        ("datasets/mnist/_SUCCESS", 105, "e5"),  # the marker's next generation: a run
    ]
    for name, generation, event_id in events:
        answer = send_event(url, name, generation, event_id=event_id)
        assert answer.status_code == 200, answer.text  # every event is acknowledged

    jobs = _jobs_reading(fake, "mnist")
    assert len(jobs) == 2
    keys = {j["labels"]["vertex-trainer-key"] for j in jobs}
    assert keys == {
        event_key(BUCKET, "datasets/mnist/_SUCCESS", "103"),
        event_key(BUCKET, "datasets/mnist/_SUCCESS", "105"),
    }
    outputs = sorted(j["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"] for j in jobs)
    assert outputs == [  # each run's own folder below the templated output_dir, named after its key
        f"gs://out-bucket/runs/mnist-{g}/"
        + run_name(jobs[0]["displayName"], event_key(BUCKET, "datasets/mnist/_SUCCESS", g))
        for g in ("103", "105")
    ]
    for job in jobs:  # the rendered job, image pinned, Flex Start kept
        pool = job["jobSpec"]["workerPoolSpecs"][0]
        assert pool["containerSpec"]["imageUri"].endswith("/trainer:v1")
        assert job["jobSpec"]["scheduling"]["strategy"] == "FLEX_START"
        assert job["labels"]["dataset"] == "mnist"

    records = lines.await_records(
        6, lambda r: r.get("object", "").endswith("mnist/_SUCCESS") or "mnist/train-" in r.get("object", "")
    )
    assert [r["action"] for r in records] == [
        "ignored",
        "ignored",
        "started",
        "adopted",
        "ignored",
        "started",
    ]


def test_the_function_runs_the_vendored_vertex_trainer(job_function):
    _, lines, out = job_function
    (ready,) = lines.await_records(1, lambda r: "ready" in r["message"])
    assert Path(ready["vertex_trainer"]) == out / "vertex_trainer"


def test_a_transient_failure_answers_500_and_the_redelivery_starts_the_run(fake, job_function):
    url, lines, _ = job_function
    fault = fake.fail("list", 503, times=50)  # Vertex AI unreachable: retries run out
    try:
        answer = send_event(url, "datasets/fashion/_SUCCESS", 7)
    finally:
        fault.times = 0
    assert answer.status_code == 500  # Eventarc delivers it again
    assert _jobs_reading(fake, "fashion") == []
    assert send_event(url, "datasets/fashion/_SUCCESS", 7).status_code == 200
    assert len(_jobs_reading(fake, "fashion")) == 1
    records = lines.await_records(2, lambda r: "fashion" in r.get("object", ""))
    assert [r["action"] for r in records] == ["retry", "started"]


def test_a_permanent_failure_is_logged_and_acknowledged(fake, job_function):
    url, lines, _ = job_function
    # The folder's name becomes a label value, and "Bad.Folder" is not one: the spec is invalid
    # for this event, and would be on every delivery.
    answer = send_event(url, "datasets/Bad.Folder/_SUCCESS", 9)
    assert answer.status_code == 200
    assert _jobs_reading(fake, "Bad.Folder") == []
    (record,) = lines.await_records(1, lambda r: r.get("object") == "datasets/Bad.Folder/_SUCCESS")
    assert record["action"] == "refused" and record["severity"] == "ERROR"
    assert "labels" in record["message"]


def test_events_that_are_not_object_finalizations_are_acknowledged(fake, job_function):
    url, _, _ = job_function
    before = len(fake.jobs)
    deleted = send_event(
        url, "datasets/kmnist/_SUCCESS", 3, event_type="google.cloud.storage.object.v1.deleted"
    )
    other_bucket = send_event(url, "datasets/kmnist/_SUCCESS", 3, bucket="another-bucket")
    under_prefix = send_event(url, "datasets/_SUCCESS", 3)  # names no folder
    assert [deleted.status_code, other_bucket.status_code, under_prefix.status_code] == [200, 200, 200]
    assert len(fake.jobs) == before


def test_a_spec_with_deploy_starts_one_pipeline_per_marker_generation(fake, pipeline_function):
    url, lines, _ = pipeline_function
    for generation, event_id in ((201, "p1"), (201, "p1-again"), (202, "p2")):
        assert send_event(url, "datasets/cifar/_SUCCESS", generation, event_id=event_id).status_code == 200
    runs = {
        name: run
        for name, run in fake.pipelines.runs.items()
        if run["labels"].get("vertex-trainer-key")
        in {event_key(BUCKET, "datasets/cifar/_SUCCESS", g) for g in ("201", "202")}
    }
    assert len(runs) == 2
    for name, run in runs.items():
        assert name.rsplit("/", 1)[1] == run["labels"]["vertex-trainer-key"]  # pipelineJobId = key
        assert run["runtimeConfig"]["gcsOutputDirectory"] == "gs://out-bucket/pipeline-root"
        tasks = run["pipelineSpec"]["root"]["dag"]["tasks"]
        assert {"custom-training-job", "model-upload", "endpoint-create", "model-deploy"} <= set(tasks)
        train = tasks["custom-training-job"]["inputs"]["parameters"]
        assert train["strategy"]["runtimeValue"]["constant"] == "FLEX_START"
        pools = train["worker_pool_specs"]["runtimeValue"]["constant"]
        assert pools[0]["container_spec"]["args"][1] == f"--train-data=gs://{BUCKET}/datasets/cifar/train-*"
    records = lines.await_records(3, lambda r: "cifar" in r.get("object", ""))
    assert [r["action"] for r in records] == ["started", "adopted", "started"]
