"""Submit goes down and back once (issue 44 item 5): one executor per kind behind one protocol
(api/execute.py EXECUTORS), one Handle whatever the kind (api/handles.py), and a fallback that
sends the plan's attempts and plans nothing of its own."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import yaml

from tests.capacity.conftest import SPEC as FALLBACK_SPEC
from tests.submit.conftest import SPEC as CUSTOM_SPEC
from tests.tuning.conftest import spec_data as tuning_spec_data
from vertex_trainer import api
from vertex_trainer.api import execute
from vertex_trainer.api.handles import Handle
from vertex_trainer.api.plan import KINDS
from vertex_trainer.contract import ATTEMPT_LABEL
from vertex_trainer.errors import JobFailed
from vertex_trainer.gcp.http import Refused
from vertex_trainer.local import LocalResult
from vertex_trainer.spec import build_spec
from vertex_trainer.tuning.tuning_run import LocalTuning
from vertex_trainer.vertex.hptuning import INFEASIBLE, Trial
from vertex_trainer.vertex.pipelines import PipelineRun

# The Handle's surface: every public member of the protocol (properties and methods).
SURFACE = sorted(name for name in vars(Handle) if not name.startswith("_"))


def _quiet(_line: str) -> None:
    pass


def test_each_kind_has_its_own_executor():
    assert set(execute.EXECUTORS) == set(KINDS)
    kinds_per_type = {type(e) for e in execute.EXECUTORS.values()}
    assert len(kinds_per_type) == len(KINDS)  # one executor per kind, none shared
    assert all(callable(getattr(e, "run", None)) for e in execute.EXECUTORS.values())


def test_the_handle_names_the_core_surface():
    assert {"name", "state", "console_url", "output_dir", "refresh", "wait", "cancel", "to_dict"} <= set(
        SURFACE
    )
    assert api.Handle is Handle and execute.Handle is Handle  # the public name, kept


@pytest.mark.wire
@pytest.mark.parametrize(
    "kind,data",
    [
        ("custom", lambda: yaml.safe_load(CUSTOM_SPEC)),
        ("fallback", lambda: copy.deepcopy(FALLBACK_SPEC)),
        ("tuning", tuning_spec_data),
    ],
)
def test_submit_then_wait_through_the_handle_whatever_the_kind(fake, settings, kind, data):
    """`vt.submit(spec).wait()`: the same calls on each kind's handle, none of its own."""
    spec = build_spec(data())
    if kind == "tuning":
        fake.tuning.set_metrics([0.7])
    handle: Handle = api.submit(spec, idempotency_key=f"handle-{kind}", settings=settings, log=_quiet)
    assert api.plan_submit(spec, settings=settings).kind == kind
    if kind == "tuning":
        fake.tuning.jobs[handle.name].data["maxTrialCount"] = 1
    assert [m for m in SURFACE if not hasattr(handle, m)] == []
    assert handle.wait() is handle and handle.done and handle.succeeded
    assert handle.refresh() is handle and handle.cancel() is handle  # (ended: nothing to cancel)
    out = handle.to_dict()
    assert (out["name"], out["state"], out["console_url"]) == (handle.name, handle.state, handle.console_url)
    assert out["idempotency_key"] == handle.idempotency_key == f"handle-{kind}"
    assert handle.console_url and handle.output_dir and handle.output_dir.startswith("gs://test-bucket/")


@pytest.mark.wire
def test_the_fallback_sends_the_plans_attempts_and_plans_none_of_its_own(fake, settings):
    """The executor runs the plan as given: a plan cut to its first two attempts stops after
    them (the spec's own plan has a third, standard, that would succeed)."""
    spec = build_spec(copy.deepcopy(FALLBACK_SPEC))
    fake.no_capacity("FLEX_START")
    fake.no_quota("SPOT")
    whole = api.plan_submit(spec, idempotency_key="cut", wait=True, settings=settings)
    assert [a.planned.strategy for a in whole.attempts] == ["flex-start", "spot", "standard"]
    marked = tuple(
        dataclasses.replace(a, body={**a.body, "labels": {**a.body["labels"], "planned": f"a{a.n}"}})
        for a in whole.attempts[:2]
    )
    cut = dataclasses.replace(whole, attempts=marked)
    with pytest.raises(Refused, match="every attempt of the plan was refused"):
        execute.run(cut, settings=settings, log=_quiet)
    creates = fake.calls("create")
    assert [c.body["labels"]["planned"] for c in creates] == ["a1", "a2"]  # the plan's own bodies
    assert [c.body["labels"][ATTEMPT_LABEL] for c in creates] == ["1", "2"]


def test_a_run_here_is_a_handle_that_has_ended(tmp_path):
    def result(state: str) -> LocalResult:
        return LocalResult(
            name="local-1",
            state=state,
            output_dir=str(tmp_path),
            model_dir=str(tmp_path / "model"),
            metrics=None,
            exit_code=0 if state == "JOB_STATE_SUCCEEDED" else 1,
            failed_replica=None if state == "JOB_STATE_SUCCEEDED" else "workerpool0-0",
            failed_exit_code=None if state == "JOB_STATE_SUCCEEDED" else 3,
        )

    ok = api.LocalJob(result("JOB_STATE_SUCCEEDED"), {}, None, "vt-1")
    failed = api.LocalJob(result("JOB_STATE_FAILED"), {}, None, "vt-2")
    for job in (ok, failed):
        assert [m for m in SURFACE if not hasattr(job, m)] == []
        assert job.refresh() is job and job.cancel() is job and job.done
        assert job.to_dict()["console_url"] is None and job.output_dir == str(tmp_path)
    assert ok.wait() is ok and failed.wait(check=False) is failed
    with pytest.raises(JobFailed, match=r"local job local-1 ended FAILED \(workerpool0-0 exited with 3\)"):
        failed.wait()


def test_a_study_here_is_a_handle_that_has_ended(tmp_path):
    trial = Trial("1", INFEASIBLE, {"lr": 0.1}, None, output_dir=str(tmp_path / "1"), error="exit 1")
    study = LocalTuning(
        name="tune-1",
        state="JOB_STATE_FAILED",
        output_dir=str(tmp_path),
        goal="MAXIMIZE",
        metric_id="accuracy",
        image=None,
        idempotency_key="vt-3",
        found=[trial],
    )
    assert [m for m in SURFACE if not hasattr(study, m)] == []
    assert study.refresh() is study and study.cancel() is study and study.wait(check=False) is study
    with pytest.raises(JobFailed, match=r"1 of 1 trials failed \(trial 1: exit 1\)"):
        study.wait()


def test_a_pipeline_runs_output_dir_is_its_root():
    run = PipelineRun({"name": "p", "runtimeConfig": {"gcsOutputDirectory": "gs://b/root/"}}, client=None)
    assert run.output_dir == "gs://b/root"
    assert PipelineRun({"name": "p"}, client=None).output_dir is None
