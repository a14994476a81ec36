"""A careless user serves "the spec's runs" after a run that went wrong (issue 42, A1).

`serve runs/quickstart` (a spec's output_dir) took its newest run, whatever became of it: after a
good run, a run that failed or was interrupted made `serve` load that run's model (a half-written
or a stale one, presented as the model), or answer "no exported model in runs/quickstart" with a
hint naming the same broken run, as if the good model were gone. Now a base folder means its
newest run that SUCCEEDED with a model, and a line says so when that is not its newest run; a
run's own folder is still served as given, with a line when that run did not succeed; a base with
no such run is exit 2 naming its newest runs and how they ended.

The server never loads anything here (no TensorFlow): the port is taken, so `serve` ends (exit 2,
"cannot listen") right after choosing the model, and what it chose is on stderr.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.cli_support import edge_env
from tests.shared import cli_runner, script_job

# Writes a model that carries the job id, then fails with --fail (after the export, as a trainer
# whose evaluation or metrics step crashes), else writes metrics.json.
TASK = """
import json, os, sys
model = os.environ["AIP_MODEL_DIR"].rstrip("/")
job = os.environ["CLOUD_ML_JOB_ID"]
if "--no-model" not in sys.argv:
    os.makedirs(model, exist_ok=True)
    open(os.path.join(model, "saved_model.pb"), "w").write(job)
if "--fail" in sys.argv or "--no-model" in sys.argv:
    raise SystemExit(3)
json.dump({"job": job}, open(os.path.join(os.path.dirname(model), "metrics.json"), "w"))
"""


@pytest.fixture
def busy_port():
    """A port on 127.0.0.1 that something else listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def _setup(tmp_path: Path):
    spec = script_job(tmp_path, TASK, tmp_path / "runs")
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)

    def submit(*args: str) -> Path:
        done = run("submit", spec, "--local", "--output", "json", *args)
        return Path(json.loads(done.stdout)["output_dir"])

    return run, submit


@pytest.mark.parametrize("broken", ["--fail", "--no-model"])
def test_a_base_folder_serves_its_newest_run_that_succeeded(tmp_path, busy_port, broken):
    run, submit = _setup(tmp_path)
    good = submit()
    bad = submit("--set", f'args=["{broken}"]')
    assert (tmp_path / "runs" / "latest").resolve() == bad  # the newest run is the broken one
    served = run("serve", tmp_path / "runs", "--port", busy_port)
    assert served.returncode == 2 and "Traceback" not in served.stderr
    assert "cannot listen" in served.stderr  # (the port: nothing was loaded)
    assert (
        f"serving run {good.name}, the newest that SUCCEEDED: the newest run, {bad.name}, ended FAILED"
        in served.stderr
    )
    assert "no exported model" not in served.stderr


def test_a_runs_own_folder_is_served_as_given_with_a_line_when_it_did_not_succeed(tmp_path, busy_port):
    run, submit = _setup(tmp_path)
    submit()
    bad = submit("--set", 'args=["--fail"]')
    for ref in (bad, tmp_path / "runs" / "latest", tmp_path / "runs" / "latest" / "model", bad / "model"):
        served = run("serve", ref, "--port", busy_port)
        assert served.returncode == 2 and "cannot listen" in served.stderr
        assert f"warning: run {bad.name} ended FAILED: its model may be incomplete" in served.stderr
    missing = submit("--set", 'args=["--no-model"]')
    refused = run("serve", missing, "--port", busy_port)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    said = f"no exported model in {missing} (saved_model.pb is missing; the run ended FAILED)"
    assert said in refused.stderr


def test_a_base_folder_without_a_run_that_succeeded_is_exit_2_naming_its_runs(tmp_path, busy_port):
    run, submit = _setup(tmp_path)
    first = submit("--set", 'args=["--fail"]')
    second = submit("--set", 'args=["--no-model"]')
    refused = run("serve", tmp_path / "runs", "--port", busy_port)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "no run there SUCCEEDED with a model" in refused.stderr
    assert f"{first.name} ended FAILED; {second.name} ended FAILED" in refused.stderr
    assert "cannot listen" not in refused.stderr  # refused before listening
