"""`logs` on what is neither a job nor a run, and a run's record shown without TensorFlow's
start-up banner (issue 24 items 6 and 7)."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

from tests.cli_support import edge_env, invoke
from tests.shared import records
from vertex_trainer.local.runlog import RunLog

BANNER = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1796119421.366487   21191 port.cc:153] oneDNN custom operations are on. You may see "
    "slightly different numerical results due to floating-point round-off errors.",
    "I0000 00:00:1796119421.451152   21191 cpu_feature_guard.cc:227] This TensorFlow binary is optimized "
    "to use available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow with the "
    "appropriate compiler flags.",
]


def logs(tmp_path, *args) -> subprocess.CompletedProcess:
    return invoke(["logs", *args], env=edge_env(tmp_path), cwd=tmp_path)  # in this process


def test_neither_a_job_nor_a_run_directory_is_exit_2_saying_so(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("x")
    for ref, says in (
        ("runs/nope", "'runs/nope' is neither a job nor a local run's directory"),
        ("empty", "'empty' is a directory, but no local run wrote to it"),
        ("file.txt", "'file.txt' is a file, neither a job nor a local run's output directory"),
    ):
        result = logs(tmp_path, ref)
        assert result.returncode == 2 and result.stdout == ""
        lines = result.stderr.splitlines()
        assert lines[0].startswith(f"error: {says}")
        assert "customJobs/ID" in lines[1] and "output_dir" in lines[1] and len(lines) == 2


def test_a_runs_lines_show_without_the_tensorflow_banner(tmp_path):
    out = tmp_path / "runs" / "quick"
    out.mkdir(parents=True)
    record = RunLog(str(records(out)), ["workerpool0-0"])
    record.write([("workerpool0-0", line) for line in [*BANNER, "epoch 1/1 loss 0.5"]])
    record.close(SimpleNamespace(name="quick", state="JOB_STATE_SUCCEEDED", exit_code=0))
    result = logs(tmp_path, "runs/quick")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[workerpool0-0] epoch 1/1 loss 0.5\n"
    kept = (records(out) / "logs" / "workerpool0-0.log").read_text()
    assert "absl::InitializeLog" in kept  # the record keeps every line
    as_json = logs(tmp_path, "runs/quick", "--output", "json")
    assert len(as_json.stdout.splitlines()) == len(BANNER) + 1  # the data, whole
