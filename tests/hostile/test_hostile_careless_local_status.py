"""A careless user asks `status` or `cancel` about a local run (issue 42, A1): `submit --local`
printed its folder, so `vertex-trainer status runs/quickstart/...` is the natural next line. It
was refused with only "not a job: pass projects/P/locations/R/customJobs/ID": nothing said what
reads a local run or how one stops. Now the refusal (exit 2, unchanged) says both."""

from __future__ import annotations

import pytest

from tests.cli_support import edge_env
from tests.shared import cli_runner


@pytest.mark.parametrize("command", ["status", "cancel"])
@pytest.mark.parametrize("ref", ["runs/quickstart/latest", "./runs", "/tmp/x/runs/digits-k1"])
def test_a_local_runs_folder_gets_a_hint_naming_what_reads_it(tmp_path, command, ref):
    done = cli_runner(edge_env(tmp_path), cwd=tmp_path)(command, ref)
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stdout == ""
    assert f"{ref!r} is not a job" in done.stderr
    assert (
        "hint: a local run is read by `vertex-trainer logs RUN` and `vertex-trainer report RUN`"
        in done.stderr
    )
    assert "Ctrl-C where it runs" in done.stderr


def test_a_mistyped_job_gets_no_such_hint(tmp_path):
    done = cli_runner(edge_env(tmp_path), cwd=tmp_path)("status", "my-job")
    assert done.returncode == 2 and "'my-job' is not a job" in done.stderr and "local run" not in done.stderr
