"""Every run its own, on Vertex AI (issue 40 item 1, docs/contract.md section 15), against the
fake Vertex AI and the storage emulator: each submission's CustomJob has a folder of its own as
its baseOutputDirectory, shared by what belongs to it (an adopted retry, every fallback attempt,
a tuning job's trials) and named where a person looks (submit, status, the dry run); --resume
sends a job into an earlier run's folder, and only one that holds something."""

from __future__ import annotations

import json

import pytest
import requests

from tests.cli_support import edge_env
from tests.shared import GS_BASE, GS_JOB, T4_JOB, cli_runner, merged, spec_yaml, storage_emulator, write_spec
from vertex_trainer import api
from vertex_trainer.contract import run_name
from vertex_trainer.spec import build_spec

BASE, JOB = GS_BASE, GS_JOB


def _folder(body: dict) -> str:
    return body["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"]


def _put(url: str, bucket: str, name: str) -> None:
    r = requests.post(
        f"{url}/upload/storage/v1/b/{bucket}/o", params={"uploadType": "media", "name": name}, data=b"x"
    )
    assert r.ok, r.text


@pytest.fixture
def gcs():
    with storage_emulator("out-bucket", "data-bucket") as url:
        _put(url, "data-bucket", "d/train-00000")
        yield url


@pytest.fixture
def run(fake, gcs, tmp_path):
    return cli_runner(edge_env(tmp_path, VERTEX_TRAINER_API_ENDPOINT=fake.url, STORAGE_EMULATOR_HOST=gcs))


def test_every_attempt_and_trial_of_a_submission_shares_its_folder():
    """A fallback plan's attempts are one submission (a refused attempt's successor resumes from
    its checkpoints); a tuning job's trials go below its folder, as Vertex AI puts them
    (<folder>/<trial id>)."""
    fallback = build_spec(
        merged(T4_JOB, {**JOB, "scheduling": {"strategy": "spot", "fallback": ["standard"]}})
    )
    plan = api.plan_submit(fallback, idempotency_key="ci-3")
    folders = {_folder(a.body) for a in plan.attempts}
    assert len(plan.attempts) == 2 and folders == {f"{BASE}/digits-ci-3"}
    assert plan.output == f"{BASE}/digits-ci-3" and plan.dry_run().to_dict()["output_dir"] == plan.output
    tune = {"max_trials": 2, "parameters": {"learning_rate": {"values": [0.1, 0.2]}}}
    evaluated = {**JOB, "tune": tune, "trainer": {**JOB["trainer"], "eval_data": "gs://data-bucket/d/ev-*"}}
    study = api.plan_submit(build_spec(merged(T4_JOB, evaluated)), idempotency_key="ci-4")
    assert study.tuning is not None
    assert study.tuning["trialJobSpec"]["baseOutputDirectory"]["outputUriPrefix"] == f"{BASE}/digits-ci-4"
    fresh = [api.plan_submit(fallback) for _ in range(2)]  # no key: a fresh one, a fresh folder each
    assert fresh[0].output != fresh[1].output
    assert all((p.output or "").startswith(f"{BASE}/digits-") for p in fresh)
    assert fresh[0].run == run_name("digits", fresh[0].key)


def test_two_submits_have_two_folders_and_a_retry_adopts_the_first(fake, run, tmp_path):
    spec = write_spec(tmp_path, spec_yaml(None, **JOB))
    first = json.loads(run("submit", spec, "--output", "json").stdout)
    second = json.loads(run("submit", spec, "--output", "json").stdout)
    assert first["output_dir"] != second["output_dir"]
    assert {_folder(j) for j in fake.jobs.values()} == {first["output_dir"], second["output_dir"]}
    keyed = [
        json.loads(run("submit", spec, "--output", "json", "--idempotency-key", "ci-9").stdout) for _ in "ab"
    ]
    assert keyed[1]["adopted"] is True and keyed[0]["name"] == keyed[1]["name"]
    assert keyed[0]["output_dir"] == keyed[1]["output_dir"] == f"{BASE}/digits-ci-9"
    assert len(fake.jobs) == 3
    status = run("status", keyed[0]["name"])
    assert status.returncode == 0 and f"output   {BASE}/digits-ci-9\n" in status.stdout
    created = run("submit", spec, "--idempotency-key", "ci-10")
    assert f"output   {BASE}/digits-ci-10\n" in created.stdout
    dry = run("submit", spec, "--dry-run", "--idempotency-key", "ci-11")
    assert f'"outputUriPrefix": "{BASE}/digits-ci-11"' in dry.stdout
    assert f"#    output: {BASE}/digits-ci-11 (this submission's own folder" in dry.stdout
    planned = run("validate", spec)
    assert f"  output    {BASE}/digits-<key or UTC time>/ (each submission its own folder)" in planned.stdout


def test_resume_sends_the_job_into_an_earlier_runs_folder_that_holds_something(fake, gcs, run, tmp_path):
    spec = write_spec(tmp_path, spec_yaml(None, **JOB))
    empty = run("submit", spec, "--resume", "digits-gone")
    assert empty.returncode == 2 and f"--resume: {BASE}/digits-gone holds nothing" in empty.stderr
    assert fake.jobs == {}  # nothing created (and nothing built)
    _put(gcs, "out-bucket", "runs/digits/digits-ci-1/checkpoints/ckpt-1.index")
    resumed = json.loads(run("submit", spec, "--resume", "digits-ci-1", "--output", "json").stdout)
    assert resumed["output_dir"] == f"{BASE}/digits-ci-1" and resumed["idempotency_key"] != "ci-1"
    (job,) = fake.jobs.values()
    assert _folder(job) == f"{BASE}/digits-ci-1"
    local_path = run("submit", spec, "--resume", str(tmp_path))
    assert local_path.returncode == 2 and "continues a run in Cloud Storage" in local_path.stderr
