"""A notebook user interrupts a run or a tuning study here (Jupyter's "interrupt kernel" is
SIGINT): the run stops and so does the cell. A run here caught the interrupt, stopped its
replicas and returned a CANCELLED LocalJob (a study, its LocalTuning), so the cell went on with
its next line, and a loop of runs (`for lr in ...: vt.submit(spec, local=True)`) started the next
run: Ctrl-C could not stop the loop. It now raises RunInterrupted (a KeyboardInterrupt) once the
replicas are stopped; the CLI still ends exit 1 with the run's summary (docs/local.md)."""

from __future__ import annotations

import os
import signal

import pytest
import yaml

from tests.cli_support import edge_env, invoke
from vertex_trainer import api
from vertex_trainer.errors import RunInterrupted
from vertex_trainer.settings import Settings
from vertex_trainer.spec import build_spec

# The replica interrupts the process that runs it (the notebook's kernel, the CLI: this test's
# process), as Ctrl-C would, then waits to be stopped.
TASK = """
import os, pathlib, signal, sys, time
pathlib.Path(sys.argv[1]).write_text(str(os.getpid()))
os.kill(int(sys.argv[2]), signal.SIGINT)
time.sleep(120)
"""


def _spec(tmp_path) -> dict:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "task.py").write_text(TASK)
    return {
        "name": "nb",
        "project": "my-project",
        "region": "us-central1",
        "hardware": "cpu",
        "image": {"code": str(code), "script": "task.py", "repository": "us-docker.pkg.dev/p/r/nb"},
        "args": [str(tmp_path / "replica.pid"), str(os.getpid())],
        "output_dir": str(tmp_path / "out"),
    }


def _gone(pid_file) -> bool:
    try:
        os.kill(int(pid_file.read_text()), 0)
    except ProcessLookupError:
        return True
    return False


def test_an_interrupted_run_here_raises_keyboard_interrupt_after_stopping_it(tmp_path):
    settings = Settings.from_environ(edge_env(tmp_path))
    spec = build_spec(_spec(tmp_path))
    before = signal.getsignal(signal.SIGINT)
    started = []
    with pytest.raises(KeyboardInterrupt) as stopped:  # the cell (and a loop of runs) stops here
        for key in ("nb-1", "nb-2"):
            started.append(key)
            api.submit(spec, local=True, idempotency_key=key, settings=settings)
    assert started == ["nb-1"]
    assert isinstance(stopped.value, RunInterrupted)
    job = stopped.value.job  # the ended run's handle, as submit returned it before
    assert job.state == "JOB_STATE_CANCELLED" and job.output_dir == str(tmp_path / "out" / "nb-nb-1")
    assert signal.getsignal(signal.SIGINT) == before  # the notebook's own handler is back
    assert _gone(tmp_path / "replica.pid")  # the replica was stopped, not left running


def test_an_interrupted_study_here_raises_keyboard_interrupt_too(tmp_path):
    settings = Settings.from_environ(edge_env(tmp_path))
    tune = {
        "metric": "accuracy",
        "max_trials": 2,
        "parallel_trials": 1,
        "parameters": {"lr": {"values": [0.1, 0.2]}},
    }
    spec = build_spec({**_spec(tmp_path), "tune": tune})
    with pytest.raises(RunInterrupted) as stopped:
        api.submit(spec, local=True, idempotency_key="nb-3", settings=settings)
    assert stopped.value.job.state == "JOB_STATE_CANCELLED"
    assert _gone(tmp_path / "replica.pid")


def test_an_interrupted_run_here_still_ends_exit_1_with_its_summary_in_the_cli(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(_spec(tmp_path)))
    result = invoke(["submit", spec, "--local", "--idempotency-key", "ci-1"], env=edge_env(tmp_path))
    assert result.returncode == 1, result.stderr
    assert "Interrupted: stopping all replicas" in result.stderr and "CANCELLED" in result.stderr
    assert _gone(tmp_path / "replica.pid")
