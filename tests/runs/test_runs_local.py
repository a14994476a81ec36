"""Every run its own, here (issue 40 items 1-2, docs/contract.md section 15): two local submits of
one spec run in two folders below output_dir, `latest` names the newer, `report`, `logs` and
`serve`'s look-up find each run's own; the tool's records sit beside a run's folder, so a script
that empties its folder (or all of output_dir) ends as it should; `--resume` continues a run in
its folder; `fixed_output_dir` is the explicit one-folder choice."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_support import edge_env
from tests.runs.conftest import REPOSITORY, write_spec
from tests.shared import cli_runner, latest_run, records
from vertex_trainer.api.report import report_data


def _run(tmp_path: Path):
    return cli_runner(edge_env(tmp_path), cwd=tmp_path)


def _folder(stdout: str) -> Path:
    """The `output` line of submit --local's summary."""
    (line,) = [x for x in stdout.splitlines() if x.startswith("output ")]
    return Path(line.split(None, 1)[1])


def test_two_submits_run_in_two_folders_and_each_is_found_as_its_own(tmp_path, code_dir):
    budget = {"strategy": "standard", "max_cost": 5}
    run, spec = _run(tmp_path), write_spec(tmp_path, code_dir, region="europe-west4", scheduling=budget)
    first = run("submit", spec, "--local")
    second = run("submit", spec, "--local")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    one, two = _folder(first.stdout), _folder(second.stdout)
    base = tmp_path / "runs"
    assert one != two and one.parent == two.parent == base
    assert one.name.startswith("digits-") and two.name.startswith("digits-")
    assert latest_run(base) == two  # the newest run started
    jobs = [json.loads((f / "metrics.json").read_text())["job"] for f in (one, two)]
    assert jobs[0] != jobs[1]  # neither wrote to the other's folder
    assert [json.loads((f / "metrics.json").read_text())["runs_in_folder"] for f in (one, two)] == [1, 1]
    assert (one / "model" / "saved_model.pb").read_text() == jobs[0]
    # the records are beside each folder, never in it
    for folder, job in zip((one, two), jobs, strict=True):
        assert sorted(p.name for p in folder.iterdir()) == ["checkpoints", "metrics.json", "model"]
        kept = json.loads((records(folder) / "run.json").read_text())
        assert kept["run"] == folder.name and kept["job_id"] == job and kept["output_dir"] == str(folder)
        assert kept["region"] == "europe-west4" and kept["max_cost"] == 5  # what its report prices by
        assert json.loads((records(folder) / "result.json").read_text())["state"] == "JOB_STATE_SUCCEEDED"
    # report and logs: a run's folder is that run; the base is the newest
    data = report_data(str(one))
    assert data.metrics["job"] == jobs[0] and data.max_cost == 5.0  # from run.json, no YAML read
    assert data.cost is not None and data.cost["what"] == "this run's time on Vertex AI in europe-west4"
    assert report_data(str(base)).metrics["job"] == jobs[1]
    for ref, job in ((one, jobs[0]), (base, jobs[1]), (base / "latest", jobs[1])):
        logs = run("logs", ref)
        assert logs.returncode == 0 and f"trained {job} run 1" in logs.stdout, logs.stderr
    # the summary's model line is the run's own
    assert f"model    {one}/model" in first.stdout


def test_the_same_key_twice_is_one_folder(tmp_path, code_dir):
    """A key names a submission: run here twice with it, the second finds the first's folder;
    the first having SUCCEEDED, it is adopted and nothing runs again, as a retried cloud submit
    adopts the first's job (a retry of a run that did not succeed runs again in the folder:
    tests/hostile/test_hostile_careless_retry.py)."""
    run, spec = _run(tmp_path), write_spec(tmp_path, code_dir)
    first = run("submit", spec, "--local", "--idempotency-key", "ci-7")
    again = run("submit", spec, "--local", "--idempotency-key", "ci-7")
    assert first.returncode == again.returncode == 0, first.stderr + again.stderr
    folder = tmp_path / "runs" / "digits-ci-7"
    assert _folder(first.stdout) == _folder(again.stdout) == folder
    assert json.loads((folder / "metrics.json").read_text())["runs_in_folder"] == 1


def test_a_script_that_empties_its_folder_first_ends_as_it_should(tmp_path, code_dir):
    """Issue 40: a trainer that removes its output folder before training (the taxifare course's
    tf.io.gfile.rmtree) trained fine, then the tool ended with a traceback on its own record. The
    records are beside the folder now; even a script that removes all of output_dir gets its run
    recorded."""
    run = _run(tmp_path)
    for wipe in ("run", "output_dir"):
        spec = write_spec(tmp_path, code_dir, args=[f"--wipe={wipe}"])
        result = run("submit", spec, "--local")
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr + result.stdout
        folder = _folder(result.stdout)
        assert (folder / "model" / "saved_model.pb").is_file()
        ended = json.loads((records(folder) / "result.json").read_text())
        assert ended["state"] == "JOB_STATE_SUCCEEDED" and ended["exit_code"] == 0
    assert report_data(str(folder)).state == "JOB_STATE_SUCCEEDED"


def test_resume_continues_a_run_in_its_folder_and_a_missing_one_is_exit_2(tmp_path, code_dir):
    run, spec = _run(tmp_path), write_spec(tmp_path, code_dir)
    first = run("submit", spec, "--local")
    folder = _folder(first.stdout)
    resumed = run("submit", spec, "--local", "--resume", folder.name)
    assert resumed.returncode == 0, resumed.stderr
    assert _folder(resumed.stdout) == folder  # the same folder, by its name below output_dir
    assert json.loads((folder / "metrics.json").read_text())["runs_in_folder"] == 2  # its checkpoints
    assert latest_run(tmp_path / "runs") == folder  # no new run: latest stays where it was
    by_path = run("submit", spec, "--local", "--resume", str(folder))
    assert by_path.returncode == 0 and _folder(by_path.stdout) == folder
    assert len(list((tmp_path / "runs").glob("digits-*"))) == 1

    missing = run("submit", spec, "--local", "--resume", "digits-nope")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "--resume 'digits-nope': no run in" in missing.stderr
    assert f"runs there: {folder.name}" in missing.stderr
    assert not (tmp_path / "runs" / "digits-nope").exists()
    assert run("submit", spec, "--local", "--resume", "Bad Name").returncode == 2


def test_fixed_output_dir_writes_to_output_dir_itself(tmp_path, code_dir):
    """The explicit, documented one-folder choice: every run writes to output_dir (the second
    continues the first's checkpoints and replaces its model); the records stay beside it."""
    run = _run(tmp_path)
    spec = write_spec(tmp_path, code_dir, fixed_output_dir=True)
    for n in (1, 2):
        result = run("submit", spec, "--local")
        assert result.returncode == 0, result.stderr
        assert _folder(result.stdout) == tmp_path / "runs"
        assert json.loads((tmp_path / "runs" / "metrics.json").read_text())["runs_in_folder"] == n
    assert not (tmp_path / "runs" / "latest").exists()
    assert json.loads((records(tmp_path / "runs") / "result.json").read_text())["exit_code"] == 0
    resumed = run("submit", spec, "--local", "--resume", "x")
    assert resumed.returncode == 2 and "fixed_output_dir" in resumed.stderr
    no_base = write_spec(tmp_path, code_dir, fixed_output_dir=True, output_dir=None)
    refused = run("validate", no_base, "--local")
    assert refused.returncode == 2 and "fixed_output_dir: needs output_dir" in refused.stderr


def test_serve_looks_for_the_model_in_a_runs_folder_or_output_dirs_newest_run(tmp_path, code_dir):
    """`serve runs/quickstart` means the newest run's model/ (loading a real export:
    tests/serving); a folder with no run, or whose newest run exported nothing, is exit 2 saying
    where a model is found."""
    run = _run(tmp_path)
    failing = tmp_path / "code" / "fail.py"
    failing.write_text("raise SystemExit(3)\n")
    image = {"code": str(code_dir), "script": "fail.py", "repository": REPOSITORY}
    spec = write_spec(tmp_path, code_dir, image=image)
    assert run("submit", spec, "--local").returncode == 1  # a run, but no model
    for where in (tmp_path / "runs", tmp_path):
        refused = run("serve", where)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
        assert "runs/quickstart/latest/model" in refused.stderr
