"""A PipelineJob's DAG in the sandbox, as Vertex AI Pipelines runs it: independent tasks at the
same time, a task once all its upstream tasks succeeded, a failed task failing the run under
either `failurePolicy`, a cancel stopping every running task. The tasks are small compiled KFP
container components (`python3 -c`, no GCPC, no TensorFlow) that meet through files: a branch
that waits for its sibling's file can only end if both run at once."""

# No `from __future__ import annotations`: kfp reads the components' annotations as objects.
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml

from tests.process_support import pid_alive
from vertex_trainer.automation import pipeline_job
from vertex_trainer.vertex.pipelines import PipelinesClient

from .conftest import BUCKET, PROJECT, REGION

# One sandbox for the module (conftest.py): each test looks at its own run, its tasks in its own folder.
SHARED_SANDBOX = True

# A task: writes its pid to DIR/<name>, waits (at most 120 s) for DIR/<wait_for> when one is named,
# then fails with status 4 if told to, else outputs its name.
STEP = """\
import os, pathlib, sys, time
folder, name, wait_for, fail, out = sys.argv[1:6]
pathlib.Path(folder, name).write_text(str(os.getpid()))
deadline = time.monotonic() + 120
while wait_for and not pathlib.Path(folder, wait_for).exists():
    if time.monotonic() > deadline:
        sys.exit(f"{name}: no {wait_for} within 120 s")
    time.sleep(0.05)
if fail == "yes":
    print(f"{name}: failing as told", flush=True)
    sys.exit(4)
pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
pathlib.Path(out).write_text(name)
"""
JOIN = """\
import pathlib, sys
pathlib.Path(sys.argv[3]).parent.mkdir(parents=True, exist_ok=True)
pathlib.Path(sys.argv[3]).write_text(sys.argv[1] + "+" + sys.argv[2])
"""


def _components():
    from kfp import dsl

    @dsl.container_component
    def step(folder: str, name: str, wait_for: str, fail: str, out: dsl.OutputPath(str)):
        return dsl.ContainerSpec(
            image="python:3.11", command=["python3", "-c", STEP], args=[folder, name, wait_for, fail, out]
        )

    @dsl.container_component
    def join(left: str, right: str, out: dsl.OutputPath(str)):
        return dsl.ContainerSpec(
            image="python:3.11", command=["python3", "-c", JOIN], args=[left, right, out]
        )

    return dsl, step, join


def _compile(pipeline, tmp_path: Path) -> dict:
    from kfp import compiler

    path = tmp_path / "pipeline.yaml"
    compiler.Compiler().compile(pipeline_func=pipeline, package_path=str(path))
    return next(d for d in yaml.safe_load_all(path.read_text()) if d)  # the pipeline spec


def _submit(settings, ir: dict, policy: str | None = None) -> dict:
    body = pipeline_job(display_name="dag", ir=ir, labels={}, root=f"gs://{BUCKET}/pipeline-root")
    if policy:
        body["runtimeConfig"]["failurePolicy"] = policy
    return PipelinesClient(PROJECT, REGION, settings=settings).create_once(
        body, f"dag-{uuid.uuid4().hex[:8]}"
    )


def _tasks(run: dict) -> dict[str, dict]:
    return {t["taskName"]: t for t in (run.get("jobDetail") or {}).get("taskDetails", [])[1:]}


def _until(check, timeout: float = 120.0):
    """check()'s first true value, read every 50 ms for at most `timeout` s (no event to await:
    the state is another process's, or the fake service's)."""
    deadline, pause = time.monotonic() + timeout, threading.Event()
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        pause.wait(0.05)
    raise AssertionError(f"not within {timeout} s")


@pytest.mark.wire
@pytest.mark.timeout(240)
def test_independent_branches_run_at_once_and_a_join_waits_for_both(sandbox, settings, tmp_path):
    dsl, step, join = _components()
    folder = str(tmp_path)

    @dsl.pipeline(name="branches")
    def pipeline():
        # Each branch waits for the other's file: run one after the other, neither would end.
        left = step(folder=folder, name="a", wait_for="b", fail="no").set_display_name("left")
        right = step(folder=folder, name="b", wait_for="a", fail="no").set_display_name("right")
        join(left=left.output, right=right.output).set_display_name("join")

    created = _submit(settings, _compile(pipeline, tmp_path))
    assert sandbox.pipelines.wait(created["name"], timeout=200)
    run = PipelinesClient(PROJECT, REGION, settings=settings).get(created["name"])
    assert run["state"] == "PIPELINE_STATE_SUCCEEDED", run.get("error")
    tasks = _tasks(run)
    assert sorted(tasks) == ["join", "left", "right"]
    assert all(t["state"] == "SUCCEEDED" for t in tasks.values())
    left, right, joined = tasks["left"], tasks["right"], tasks["join"]
    # The recorded times overlap: each branch started before the other ended.
    assert left["startTime"] < right["endTime"] and right["startTime"] < left["endTime"]
    # The join started once both had succeeded, with both outputs.
    assert joined["startTime"] >= max(left["endTime"], right["endTime"])
    assert joined["execution"]["metadata"]["input:left"] == "a"
    assert joined["execution"]["metadata"]["input:right"] == "b"
    assert joined["execution"]["metadata"]["output:out"] == "a+b"


@pytest.mark.wire
@pytest.mark.timeout(240)
@pytest.mark.parametrize("policy", [None, "PIPELINE_FAILURE_POLICY_FAIL_FAST"])
def test_a_failed_branch_fails_the_run_and_what_else_runs_follows_the_policy(
    sandbox, settings, tmp_path, policy
):
    dsl, step, join = _components()
    folder = str(tmp_path)

    @dsl.pipeline(name="one-fails")
    def pipeline():
        # "bad" fails once "good" runs (its file written), and "good" runs on until the go file.
        bad = step(folder=folder, name="bad", wait_for="good", fail="yes").set_display_name("bad")
        good = step(folder=folder, name="good", wait_for="go", fail="no").set_display_name("good")
        after = step(folder=folder, name="after", wait_for="", fail="no").set_display_name("after-good")
        after.after(good)
        join(left=bad.output, right=after.output).set_display_name("join")

    created = _submit(settings, _compile(pipeline, tmp_path), policy)
    # "bad" has failed while "good" still runs (it waits for the go file): the run goes on.
    service = sandbox.vertex.pipelines
    failed = _until(
        lambda: (
            (_tasks(service.runs[created["name"]]).get("bad") or {}).get("state") == "FAILED"
            and service.runs[created["name"]]
        )
    )
    assert _tasks(failed)["good"]["state"] == "RUNNING"
    assert failed["state"] == "PIPELINE_STATE_RUNNING"
    (tmp_path / "go").write_text("")

    assert sandbox.pipelines.wait(created["name"], timeout=200)
    run = PipelinesClient(PROJECT, REGION, settings=settings).get(created["name"])
    assert run["state"] == "PIPELINE_STATE_FAILED"
    assert run["error"]["message"].startswith(
        "The DAG failed because some tasks failed. The failed tasks are: [bad]."
    )
    assert "exited with status 4. Last line: bad: failing as told" in run["error"]["message"]
    tasks = _tasks(run)
    assert tasks["good"]["state"] == "SUCCEEDED"  # a running task goes on to its end
    assert "join" not in tasks  # downstream of the failure: never started
    if policy is None:  # FAIL_SLOW, the default: what does not depend on the failure still runs
        assert tasks["after-good"]["state"] == "SUCCEEDED"
        assert tasks["after-good"]["startTime"] >= tasks["good"]["endTime"]
    else:  # FAIL_FAST: nothing starts after a failure
        assert "after-good" not in tasks and not (tmp_path / "after").exists()


@pytest.mark.wire
@pytest.mark.timeout(240)
def test_cancel_stops_every_running_branch(sandbox, settings, tmp_path):
    dsl, step, join = _components()
    folder = str(tmp_path)

    @dsl.pipeline(name="cancelled")
    def pipeline():
        left = step(folder=folder, name="a", wait_for="never", fail="no").set_display_name("left")
        right = step(folder=folder, name="b", wait_for="never", fail="no").set_display_name("right")
        join(left=left.output, right=right.output).set_display_name("join")

    created = _submit(settings, _compile(pipeline, tmp_path))
    pids = _until(
        lambda: (
            all((tmp_path / n).exists() and (tmp_path / n).read_text() for n in "ab")
            and [int((tmp_path / n).read_text()) for n in "ab"]
        )
    )
    assert all(pid_alive(pid) for pid in pids)

    PipelinesClient(PROJECT, REGION, settings=settings).cancel(created["name"])
    assert sandbox.pipelines.wait(created["name"], timeout=120)
    run = PipelinesClient(PROJECT, REGION, settings=settings).get(created["name"])
    assert run["state"] == "PIPELINE_STATE_CANCELLED"
    tasks = _tasks(run)
    assert tasks["left"]["state"] == tasks["right"]["state"] == "CANCELLED"
    assert "join" not in tasks
    assert not any(pid_alive(pid) for pid in pids)
