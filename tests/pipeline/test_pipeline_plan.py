"""A pipeline run goes through the submit plan (issue 31): `pipeline submit` is plan_submit(...,
pipeline=True) -> the pipeline executor, so it makes submit's checks (the budget included) once,
before anything is sent; the plan holds the run's request (its id from the key, its root, the
training step's CustomJob rendered once) and the dry run prints the plan."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.pipeline.conftest import JOB
from vertex_trainer import api
from vertex_trainer.errors import UserError
from vertex_trainer.spec import build_spec
from vertex_trainer.vertex.pipelines import pipeline_job_id

pytestmark = pytest.mark.wire


def _training_job(body: dict) -> dict:
    """The inputs of the compiled pipeline's training step (the CustomJob it creates, GCPC's names)."""
    task = body["pipelineSpec"]["root"]["dag"]["tasks"]["custom-training-job"]
    return {k: v["runtimeValue"]["constant"] for k, v in task["inputs"]["parameters"].items()}


def test_the_plan_holds_the_runs_request_and_the_dry_run_prints_it(fake, spec, settings):
    plan = api.plan_submit(spec, idempotency_key="run_7", pipeline=True, settings=settings)
    assert plan.kind == "pipeline" and len(plan.attempts) == 1 and plan.pipeline is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.pipeline.run_id = "other"  # type: ignore[misc]
    run = plan.pipeline
    assert run.run_id == pipeline_job_id("run_7") != "run_7"
    assert run.root == "gs://out-bucket/pipeline-root" and run.job is plan.body  # rendered once
    assert run.lookup["method"] == "GET" and run.lookup["url"].endswith(f"/pipelineJobs/{run.run_id}")
    assert run.create["params"] == {"pipelineJobId": run.run_id} and "body" not in run.create

    dry = api.pipeline_submit(spec, idempotency_key="run_7", dry_run=True, settings=settings)
    assert fake.requests == []  # nothing sent, nothing looked up
    assert dry.to_dict() == plan.dry_run().to_dict()
    assert dry.requests == list(run.requests) and dry.job == run.body
    assert len(run.pipeline_sha256) == 64
    step = _training_job(run.body)  # the plan's CustomJob, in the step's words
    assert (
        step["worker_pool_specs"][0]["machine_spec"]["machine_type"]
        == (plan.body["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["machineType"])
    )
    assert step["labels"] == plan.body["labels"] and step["labels"]["vertex-trainer-key"] == "run_7"


def test_submit_creates_the_plans_run_once(fake, spec, settings):
    plan = api.plan_submit(spec, idempotency_key="plan-run-1", pipeline=True, settings=settings)
    first = api.pipeline_submit(spec, idempotency_key="plan-run-1", settings=settings, log=lambda _: None)
    second = api.pipeline_submit(spec, idempotency_key="plan-run-1", settings=settings, log=lambda _: None)
    assert first.name.endswith(f"/pipelineJobs/{plan.pipeline.run_id}") and second.name == first.name
    assert (first.adopted, second.adopted) == (False, True)
    (create,) = fake.calls("pipeline-create")
    assert create.body["runtimeConfig"]["gcsOutputDirectory"] == plan.pipeline.root
    assert _training_job(create.body) == _training_job(plan.pipeline.body)  # the plan's job


def test_a_pipeline_over_budget_is_refused_as_submit_refuses_it_and_nothing_is_sent(fake, settings):
    data = json.loads(json.dumps(JOB))
    data["scheduling"] = {"strategy": "standard", "timeout": "1d", "max_cost": 1}
    spec = build_spec(data)
    with pytest.raises(UserError) as submitted:
        api.submit(spec, dry_run=True, settings=settings, log=lambda _: None)
    with pytest.raises(UserError) as piped:
        api.pipeline_submit(spec, idempotency_key="budget-1", settings=settings, log=lambda _: None)
    assert piped.value.exit_code == 2 and piped.value.message == submitted.value.message
    assert "scheduling.max_cost" in piped.value.message and "nothing was sent" in piped.value.message
    with pytest.raises(UserError) as dry:
        api.pipeline_submit(spec, dry_run=True, settings=settings)
    assert dry.value.message == submitted.value.message
    assert fake.requests == []


def test_a_tune_spec_has_no_pipeline_plan(fake, spec, settings):
    from tests.tuning.conftest import spec_data

    tuned = build_spec(spec_data())
    assert api.plan_submit(tuned, settings=settings).kind == "tuning"
    with pytest.raises(UserError, match="tune: a hyperparameter tuning job has no pipeline form"):
        api.plan_submit(tuned, pipeline=True, settings=settings)
    with pytest.raises(UserError, match="a pipeline root is a gs:// path"):
        api.plan_submit(spec, pipeline=True, pipeline_root="/tmp/root", settings=settings)
    assert fake.requests == []
