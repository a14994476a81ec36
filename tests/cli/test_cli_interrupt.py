"""Ctrl-C during --wait (cli/common.stop_on_interrupt, the one place `submit --wait`, `status --wait`
and `trials --wait` handle it): the job is cancelled when asked, else the two commands to follow and
cancel it are said; `--output json` still prints the one object; the exit code is 130. A block
that ends without Ctrl-C passes through untouched. (`submit --wait` end to end, with a real
SIGINT: tests/submit/test_submit_cli.py::test_ctrl_c_while_waiting.)"""

from __future__ import annotations

import json

import pytest
import typer

from vertex_trainer.cli.common import OutputFormat, stop_on_interrupt

FOLLOW = "vertex-trainer status jobs/7 --wait"
CANCEL = "vertex-trainer cancel jobs/7"


class Job:
    """What stop_on_interrupt reads of a handle: its state, cancel, to_dict and describe."""

    def __init__(self) -> None:
        self.state = "JOB_STATE_RUNNING"
        self.cancels = 0

    def cancel(self) -> None:
        self.cancels += 1
        self.state = "JOB_STATE_CANCELLING"

    def to_dict(self) -> dict:
        return {"name": "jobs/7", "state": self.state}

    def describe(self) -> dict:
        return {"name": "jobs/7", "state": self.state, "described": True}


def interrupted(job: Job, output: OutputFormat, cancel_on_interrupt: bool, describe: bool = False) -> int:
    with pytest.raises(typer.Exit) as stopped:
        with stop_on_interrupt(
            job, output, cancel_on_interrupt, follow=FOLLOW, cancel=CANCEL, describe=describe
        ):
            raise KeyboardInterrupt
    return stopped.value.exit_code


def test_ctrl_c_says_how_to_follow_and_cancel_and_exits_130(capsys):
    job = Job()
    assert interrupted(job, OutputFormat.text, cancel_on_interrupt=False) == 130
    out, err = capsys.readouterr()
    assert job.cancels == 0 and out == ""
    assert "keeps running (RUNNING)" in err
    assert f"follow it:  {FOLLOW}" in err and f"cancel it:  {CANCEL}" in err


def test_ctrl_c_with_cancel_on_interrupt_cancels_once(capsys):
    job = Job()
    assert interrupted(job, OutputFormat.text, cancel_on_interrupt=True) == 130
    _, err = capsys.readouterr()
    assert job.cancels == 1 and "cancel requested, the job is CANCELLING" in err
    assert FOLLOW not in err


@pytest.mark.parametrize("describe", [False, True])
def test_ctrl_c_with_json_output_prints_the_one_object(capsys, describe):
    job = Job()
    assert interrupted(job, OutputFormat.json, cancel_on_interrupt=False, describe=describe) == 130
    out, _ = capsys.readouterr()
    assert json.loads(out) == (job.describe() if describe else job.to_dict())


def test_a_block_without_ctrl_c_passes_through(capsys):
    job = Job()
    with stop_on_interrupt(job, OutputFormat.json, True, follow=FOLLOW, cancel=CANCEL):
        done = "waited"
    assert done == "waited" and job.cancels == 0 and capsys.readouterr() == ("", "")
    with (
        pytest.raises(ValueError),
        stop_on_interrupt(job, OutputFormat.text, True, follow=FOLLOW, cancel=CANCEL),
    ):
        raise ValueError("not an interrupt")
    assert job.cancels == 0


class PipelineRun(Job):
    """What `pipeline submit --wait` reads of a run: Job's, and a wait that Ctrl-C stops."""

    adopted, done = False, False
    name, console_url, idempotency_key = "pipelineJobs/7", "https://console/7", "k"

    def wait(self, **kwargs) -> None:
        raise KeyboardInterrupt


def test_ctrl_c_during_a_pipeline_wait_prints_the_run_object_with_json_output(capsys):
    from vertex_trainer.cli.pipeline import _show

    with pytest.raises(typer.Exit) as stopped:
        _show(PipelineRun(), OutputFormat.json, wait=True)
    out, err = capsys.readouterr()
    assert stopped.value.exit_code == 130
    assert json.loads(out) == PipelineRun().to_dict()  # its name: to follow it later
    assert "the run goes on" in err and f"pipeline status {PipelineRun.name} --wait" in err
