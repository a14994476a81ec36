"""`logs` on a local run: each replica's lines are kept (timestamped) in the run directory and
read back in the order they were shown; `--follow` tails a run until it ends."""

from __future__ import annotations

import io
import json
import os
import re
import textwrap
import threading

import pytest

from tests.shared import records
from vertex_trainer import api
from vertex_trainer.contract import Failure, JobEvent, LogEntry
from vertex_trainer.local import run_local
from vertex_trainer.local.runlog import find_run
from vertex_trainer.settings import PollPolicy, Settings

CHIEF = textwrap.dedent("""
    import time
    for i in range(3):
        print(f"chief {i}", flush=True)
        time.sleep(0.01)
""")
WORKER = "print('worker 0', flush=True)\nprint('worker 1', flush=True)"
FAILING = "import sys\nprint('about to fail', flush=True)\nsys.exit(3)"


def _pool(script: str, replicas: int = 1) -> dict:
    return {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": str(replicas),
        "containerSpec": {"imageUri": "local/trainer:x", "command": ["python", "-c", script]},
    }


def _job(out, *pools) -> dict:
    return {
        "displayName": "local-logs",
        "labels": {"vertex-trainer-key": "k"},
        "jobSpec": {"workerPoolSpecs": list(pools), "baseOutputDirectory": {"outputUriPrefix": str(out)}},
    }


def _run(job, **env):
    from rich.console import Console

    buf = io.StringIO()
    result = run_local(
        job,
        None,
        settings=Settings(environ=dict(os.environ) | env),
        console=Console(file=buf, force_terminal=False, width=200),
    )
    return result, buf.getvalue()


def test_a_local_run_keeps_each_replicas_lines_and_logs_shows_them_in_order(tmp_path, run_cli):
    out = tmp_path / "out"
    result, shown = _run(_job(out, _pool(CHIEF), _pool(WORKER)))
    assert result.succeeded
    record = records(out)  # beside the run's folder, never in it (docs/contract.md section 15)
    chief = (record / "logs" / "workerpool0-0.log").read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in chief] == ["chief 0", "chief 1", "chief 2"]
    assert all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z ", line) for line in chief)

    logs = run_cli("logs", out)
    assert logs.returncode == 0, logs.stderr
    # The order the run showed them in (its console: "name | line").
    in_display = [f"[{m[1]}] {m[2]}" for m in re.finditer(r"^(workerpool\d-\d) +\| (.*)$", shown, re.M)]
    assert logs.stdout.splitlines() == in_display and len(in_display) == 5
    assert run_cli("logs", record / "logs", "--replica", "workerpool1-0").stdout.splitlines() == [
        "[workerpool1-0] worker 0",
        "[workerpool1-0] worker 1",
    ]
    followed = run_cli("logs", out, "--follow")
    assert followed.returncode == 0 and followed.stdout == logs.stdout


def test_logs_follow_of_a_failed_local_run_exits_1_with_the_failing_replica(tmp_path, run_cli):
    out = tmp_path / "out"
    result, _ = _run(_job(out, _pool(FAILING)))
    assert result.exit_code == 1
    followed = run_cli("logs", out, "--follow")
    assert followed.returncode == 1
    assert followed.stdout.splitlines() == ["[workerpool0-0] about to fail"]
    assert "workerpool0-0 exited with code 3" in followed.stderr


@pytest.mark.timeout(60)
def test_follow_tails_a_local_run_until_it_ends(tmp_path):
    ready, go = tmp_path / "ready", tmp_path / "go"
    os.mkfifo(ready)
    os.mkfifo(go)
    script = textwrap.dedent("""
        import os
        print("one", flush=True)
        open(os.environ["READY"], "w").close()   # tell the test the run is going
        open(os.environ["GO"]).read()            # and wait for its word
        print("two", flush=True)
    """)
    out = tmp_path / "out"
    runner = threading.Thread(
        target=_run, args=(_job(out, _pool(script)),), kwargs={"READY": str(ready), "GO": str(go)}
    )
    runner.start()
    try:
        with open(ready) as f:
            f.read()
        items = []
        for item in api.logs(str(out), follow=True, settings=Settings(poll=PollPolicy(0.02))):
            items.append(item)
            if isinstance(item, LogEntry) and item.message == "one":
                with open(go, "w"):
                    pass
    finally:
        runner.join(timeout=30)
    assert [i.message for i in items if isinstance(i, LogEntry)] == ["one", "two"]
    events = [i for i in items if isinstance(i, JobEvent)]
    assert events[-1].state == "JOB_STATE_SUCCEEDED" and items[-1] is events[-1]
    assert not any(isinstance(i, Failure) for i in items)


def test_a_local_run_is_found_by_its_name_its_folder_its_records_or_its_base(tmp_path):
    """A spec's runs without output_dir go to <tmp>/vertex-trainer/<name>/<run>/: its name finds
    the newest (by the start its run.json records, not the folder's name); so does the base, the
    run's folder (or the base's `latest` link) and its records."""
    from vertex_trainer.local import layout

    base = tmp_path / "vertex-trainer" / "quickstart"
    started = {"quickstart-b": 200.0, "quickstart-a": 300.0, "quickstart-c": 100.0}
    for run, when in started.items():
        record = base / ".vertex-trainer" / run
        layout.write_run_file(str(record), run=run, run_dir=str(base / run), job_id="j")
        data = json.loads((record / layout.RUN_FILE).read_text())
        (record / layout.RUN_FILE).write_text(json.dumps({**data, "started": when}))
        (base / run).mkdir()
    (base / ".vertex-trainer" / "gcs").mkdir()  # the /gcs stand-in the runs share: no run
    newest = str(base / ".vertex-trainer" / "quickstart-a")
    assert find_run("quickstart", tmp=str(tmp_path)) == newest
    assert find_run(str(base)) == newest
    assert find_run(str(base / "quickstart-c")) == str(base / ".vertex-trainer" / "quickstart-c")
    assert find_run(str(base / ".vertex-trainer" / "quickstart-b")) == str(
        base / ".vertex-trainer" / "quickstart-b"
    )
    layout.link_latest(str(base / "quickstart-c"))
    assert find_run(str(base / "latest")) == str(base / ".vertex-trainer" / "quickstart-c")
    assert find_run(str(tmp_path / "empty")) is None


def test_a_run_made_before_the_per_run_folders_is_found_by_its_name(tmp_path):
    root = tmp_path / "vertex-trainer"
    for stamp in ("20261129-101010", "20261130-090909"):
        (root / f"quickstart-{stamp}" / "vertex-trainer" / "logs").mkdir(parents=True)
    (root / "quickstart-extra-20261201-000000" / "vertex-trainer" / "logs").mkdir(parents=True)
    found = find_run("quickstart", tmp=str(tmp_path))
    assert found == str(root / "quickstart-20261130-090909" / "vertex-trainer")
    assert find_run("nothing", tmp=str(tmp_path)) is None
    assert find_run("projects/p/locations/r/customJobs/1", tmp=str(tmp_path)) is None
