"""A careless user's retries of a local run (issue 42, A1): `submit --local` run again with the
same `--idempotency-key`, as a CI step retried whole, or typed twice in two terminals.

- A retry of a run that SUCCEEDED adopts it, as a cloud retry adopts the job its key made: nothing
  runs again, so the model, metrics and log of the run that succeeded are the ones kept
  (`"adopted": true`, exit 0). Before, the retry trained again into the same folder and replaced
  them all, the first run's log wiped.
- A retry of a run that did not succeed runs again in its folder (its checkpoints), as before.
- The same key while its run still runs is refused (exit 2, naming the run and the way out)
  before anything starts: two runners never write one folder's model and checkpoints. The
  runner holds its records' lock for the whole run (the replica itself finds it held).

The job is a script of a few lines (no TensorFlow), run by the CLI in this process.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from tests.cli_support import edge_env
from tests.shared import cli_runner, records, script_job

# The run's code: the model and metrics.json carry the job id; it reports whether the run's
# records are locked while it runs (the runner's lock: <records>/runner.lock); --fail fails it.
TASK = """
import fcntl, json, os, sys
model = os.environ["AIP_MODEL_DIR"].rstrip("/")
base = os.path.dirname(model)
job = os.environ["CLOUD_ML_JOB_ID"]
parent, run = os.path.split(base)
lock = os.path.join(parent, ".vertex-trainer", run, "runner.lock")
try:
    fd = os.open(lock, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    held = False
except OSError:
    held = True
os.makedirs(model, exist_ok=True)
open(os.path.join(model, "saved_model.pb"), "w").write(job)
print("trained", job)
if "--fail" in sys.argv:
    raise SystemExit(3)
json.dump({"job": job, "lock_held": held}, open(os.path.join(base, "metrics.json"), "w"))
"""


def _setup(tmp_path: Path):
    spec = script_job(tmp_path, TASK, tmp_path / "runs")
    return cli_runner(edge_env(tmp_path), cwd=tmp_path), spec, tmp_path / "runs" / "digits-ci-7"


def test_a_retry_of_a_run_that_succeeded_adopts_it_and_keeps_its_model(tmp_path):
    run, spec, folder = _setup(tmp_path)
    first = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert first.returncode == 0, first.stderr
    made = json.loads(first.stdout)
    assert made["adopted"] is False and made["output_dir"] == str(folder)
    job = made["metrics"]["job"]
    assert made["metrics"]["lock_held"] is True  # the runner held its records while it ran
    log = (records(folder) / "logs" / "workerpool0-0.log").read_text()
    assert f"trained {job}" in log

    again = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert again.returncode == 0, again.stderr
    adopted = json.loads(again.stdout)
    assert adopted["adopted"] is True and adopted["state"] == "JOB_STATE_SUCCEEDED"
    assert adopted["output_dir"] == str(folder) and adopted["metrics"]["job"] == job
    assert "already SUCCEEDED here" in again.stderr and "--resume digits-ci-7" in again.stderr
    assert "Running digits locally" not in again.stderr  # nothing ran
    # the run that succeeded is what is kept: its model, metrics, log and result
    assert (folder / "model" / "saved_model.pb").read_text() == job
    assert json.loads((folder / "metrics.json").read_text())["job"] == job
    assert (records(folder) / "logs" / "workerpool0-0.log").read_text() == log
    assert json.loads((records(folder) / "result.json").read_text())["job_id"] == job

    text = run("submit", spec, "--local", "--idempotency-key", "ci-7")
    assert text.returncode == 0 and f"output   {folder}" in text.stdout, text.stderr
    assert (folder / "model" / "saved_model.pb").read_text() == job

    # training it again is explicit: --resume runs again in the folder (or the folder removed)
    resumed = run("submit", spec, "--local", "--resume", "digits-ci-7", "--output", "json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["adopted"] is False
    assert (folder / "model" / "saved_model.pb").read_text() != job
    shutil.rmtree(folder)  # the run's outputs removed by hand: nothing to adopt, it runs again
    fresh = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert fresh.returncode == 0 and json.loads(fresh.stdout)["adopted"] is False, fresh.stderr
    assert (folder / "model" / "saved_model.pb").is_file()


def test_a_retry_of_a_run_that_failed_runs_again_in_its_folder(tmp_path):
    run, spec, folder = _setup(tmp_path)
    failed = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--set", 'args=["--fail"]')
    assert failed.returncode == 1, failed.stderr
    first = (folder / "model" / "saved_model.pb").read_text()
    again = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert again.returncode == 0, again.stderr
    done = json.loads(again.stdout)
    assert done["adopted"] is False and done["output_dir"] == str(folder)
    assert done["metrics"]["job"] != first
    assert (folder / "model" / "saved_model.pb").read_text() == done["metrics"]["job"]


def test_the_same_key_while_its_run_still_runs_is_refused_before_anything_starts(tmp_path):
    run, spec, folder = _setup(tmp_path)
    failed = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--set", 'args=["--fail"]')
    assert failed.returncode == 1, failed.stderr
    model = (folder / "model" / "saved_model.pb").read_text()
    log = (records(folder) / "logs" / "workerpool0-0.log").read_text()
    # another runner of this key holds the run's records, as the first run's runner did
    fd = os.open(records(folder) / "runner.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        second = run("submit", spec, "--local", "--idempotency-key", "ci-7")
    finally:
        os.close(fd)
    assert second.returncode == 2, second.stderr
    assert "Traceback" not in second.stderr
    assert "run digits-ci-7 is already running on this machine" in second.stderr
    assert str(folder) in second.stderr and "another --idempotency-key" in second.stderr
    # nothing started: the folder, its log and result are the running run's
    assert (folder / "model" / "saved_model.pb").read_text() == model
    assert (records(folder) / "logs" / "workerpool0-0.log").read_text() == log
    assert json.loads((records(folder) / "result.json").read_text())["state"] == "JOB_STATE_FAILED"
    # once that runner has ended, the retry runs
    after = run("submit", spec, "--local", "--idempotency-key", "ci-7")
    assert after.returncode == 0, after.stderr


# A study of the same kind: each trial writes the metric cloudml-hypertune would, and its model.
TRIAL = """
import json, os, sys
lr = float(next(a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--lr=")))
model = os.environ["AIP_MODEL_DIR"].rstrip("/")
os.makedirs(model, exist_ok=True)
open(os.path.join(model, "saved_model.pb"), "w").write(os.environ["CLOUD_ML_JOB_ID"])
os.makedirs(os.path.dirname(os.environ["CLOUD_ML_HP_METRIC_FILE"]), exist_ok=True)
with open(os.environ["CLOUD_ML_HP_METRIC_FILE"], "a") as f:
    f.write(json.dumps({"score": lr}) + "\\n")
json.dump({"lr": lr}, open(os.path.join(os.path.dirname(model), "metrics.json"), "w"))
"""


def test_a_retry_of_a_local_study_that_succeeded_adopts_it(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "task.py").write_text(TRIAL)
    spec = tmp_path / "tune.yaml"
    tune = {"metric": "score", "goal": "maximize", "max_trials": 2, "parallel_trials": 1, "algorithm": "grid"}
    tune["parameters"] = {"lr": {"values": [0.1, 0.2]}}
    data = {"name": "study", "hardware": "cpu", "image": {"code": str(code), "script": "task.py"}}
    spec.write_text(yaml.safe_dump({**data, "output_dir": str(tmp_path / "runs"), "tune": tune}))
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    folder = tmp_path / "runs" / "study-ci-7"

    first = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert first.returncode == 0, first.stderr
    made = json.loads(first.stdout)
    assert made["adopted"] is False and made["best_trial"]["parameters"] == {"lr": 0.2}
    models = {t: (folder / t / "model" / "saved_model.pb").read_text() for t in ("1", "2")}

    again = run("submit", spec, "--local", "--idempotency-key", "ci-7", "--output", "json")
    assert again.returncode == 0, again.stderr
    adopted = json.loads(again.stdout)
    assert adopted["adopted"] is True and "already SUCCEEDED here" in again.stderr
    assert "trial 1 started" not in again.stderr  # no trial ran again
    assert adopted["trials"] == made["trials"] and adopted["best_trial"] == made["best_trial"]
    assert adopted["metrics"] == made["metrics"] == {"lr": 0.2}
    assert {t: (folder / t / "model" / "saved_model.pb").read_text() for t in ("1", "2")} == models

    # a key whose study runs in another process (which holds its records): refused, nothing started
    running = records(tmp_path / "runs" / "study-ci-8")
    running.mkdir(parents=True)
    fd = os.open(running / "runner.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        busy = run("submit", spec, "--local", "--idempotency-key", "ci-8")
    finally:
        os.close(fd)
    assert busy.returncode == 2 and "run study-ci-8 is already running on this machine" in busy.stderr
    assert "trial 1 started" not in busy.stderr and sorted(p.name for p in running.iterdir()) == [
        "runner.lock"
    ]


def test_a_file_system_without_locks_runs_unlocked_not_refused(tmp_path, monkeypatch):
    """flock can fail for want of locks (ENOLCK on some network file systems): that is no other
    runner, so nothing is refused; only a lock held elsewhere (EWOULDBLOCK) is."""
    import errno

    from vertex_trainer.errors import UserError
    from vertex_trainer.local import run as local_run

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(local_run.fcntl, "flock", no_locks)
    fd = local_run.hold_records(str(tmp_path / "records"), "digits-ci-7", str(tmp_path / "runs"))
    os.close(fd)

    def held(fd, op):
        raise BlockingIOError(errno.EWOULDBLOCK, "Resource temporarily unavailable")

    monkeypatch.setattr(local_run.fcntl, "flock", held)
    with pytest.raises(UserError, match="already running on this machine"):
        local_run.hold_records(str(tmp_path / "records"), "digits-ci-7", str(tmp_path / "runs"))
