"""A careless user's output_dir that cannot hold a run (issue 42, A1): a file of the same name,
a file further up the path, a link to nowhere. `submit --local` ended with a traceback (exit 1,
NotADirectoryError from the run's records); now `validate --local` and `submit --local` are
exit 2 naming output_dir, its value, what is in the way and the fix, before anything is made."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_support import edge_env
from tests.shared import cli_runner, script_job

TASK = "import os; os.makedirs(os.environ['AIP_MODEL_DIR'], exist_ok=True)\n"


@pytest.fixture
def setup(tmp_path: Path):
    spec = script_job(tmp_path, TASK)
    (tmp_path / "notes").write_text("mine\n")
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    return cli_runner(edge_env(tmp_path), cwd=tmp_path), spec


@pytest.mark.parametrize(
    ("value", "blocker", "what"),
    [
        ("notes", "notes", "a file, not a folder"),
        ("notes/runs", "notes", "a file, not a folder"),
        ("gone/runs", "gone", "a broken link"),
    ],
)
def test_an_output_dir_that_cannot_be_made_is_exit_2_before_anything_is_made(
    setup, tmp_path, value, blocker, what
):
    run, spec = setup
    for command in (("validate", spec, "--local"), ("submit", spec, "--local")):
        refused = run(*command, "--set", f"output_dir={value}")
        assert refused.returncode == 2, refused.stderr
        assert "Traceback" not in refused.stderr and refused.stdout == ""
        assert f"output_dir: {tmp_path / blocker} is {what}" in refused.stderr
        assert f"(got {value!r})" in refused.stderr and "hint: point output_dir at a folder" in refused.stderr
    assert (tmp_path / "notes").read_text() == "mine\n"  # untouched
    assert not (tmp_path / ".vertex-trainer").exists() and not (tmp_path / "nowhere").exists()


def test_a_folder_to_be_made_is_fine(setup, tmp_path):
    run, spec = setup
    done = run("submit", spec, "--local", "--set", "output_dir=new/runs")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "new" / "runs" / "latest" / "model").is_dir()
