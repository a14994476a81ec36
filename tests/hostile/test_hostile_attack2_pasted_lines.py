"""Lines the tool prints to be pasted into a shell carry other people's words. The line
`submit --local` ends with, `report   vertex-trainer report FOLDER`: FOLDER is the spec's
output_dir, and a spec from a pull request with `output_dir: runs/x$(touch PWNED)` made a pasted
line run `touch PWNED` (a folder with a space made it two arguments). The `pip install` hint for a
package folder's missing build backend: its requirements are the folder's. Both are now
shell-quoted; the tests read the line back as a shell would (shlex.split)."""

from __future__ import annotations

import os
import shlex

import pytest

from tests.cli_support import edge_env
from tests.shared import cli_runner

SPEC = """\
name: fine
hardware: cpu
project: my-project-1
region: us-central1
output_dir: {out!r}
fixed_output_dir: true
image: {{code: code, script: task.py}}
"""


@pytest.mark.parametrize("folder", ["runs/x$(touch PWNED)", "my runs/a;b", "runs/it's`id`"])
def test_the_report_line_reads_back_as_the_run_folder(tmp_path, folder):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "task.py").write_text("print('trained')\n")
    (tmp_path / "spec.yaml").write_text(SPEC.format(out=folder))
    done = cli_runner(edge_env(tmp_path), cwd=tmp_path)("submit", "spec.yaml", "--local")
    assert done.returncode == 0, done.stdout + done.stderr
    [line] = [ln for ln in done.stdout.splitlines() if ln.startswith("report ")]
    assert shlex.split(line) == ["report", "vertex-trainer", "report", str(tmp_path / folder)]
    assert (tmp_path / folder).is_dir()


def test_the_build_backend_install_line_quotes_the_folders_requirements(tmp_path):
    """A code folder someone else wrote (a package folder whose build backend is not installed
    here) had its build-system.requires printed raw in the `pip install` hint: a requirement
    `x; $(touch PWNED)` ran when the line was pasted."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "task.py").write_text("print('trained')\n")
    requires = ["absent-backend-h3", "x; $(touch PWNED)", "it's `id`"]
    (code / "pyproject.toml").write_text(
        f'[build-system]\nrequires = {requires!r}\nbuild-backend = "absent_backend_h3"\n'
        '[project]\nname = "pkg"\nversion = "1"\n'
    )
    (tmp_path / "spec.yaml").write_text(SPEC.format(out="runs"))
    done = cli_runner(edge_env(tmp_path), cwd=tmp_path)("validate", "spec.yaml", "--local")
    assert done.returncode == 2, done.stdout + done.stderr
    [hint] = [ln for ln in done.stderr.splitlines() if "hint: install it here: " in ln]
    assert shlex.split(hint.split("install it here: ", 1)[1])[-4:] == ["install", *requires]


@pytest.mark.parametrize("folder", ["runs/x$(touch PWNED)", "my runs/a;b"])
def test_the_logs_line_of_a_run_already_running_reads_back_as_its_folder(tmp_path, folder):
    """A second runner of the same records is refused with a `vertex-trainer logs FOLDER --follow`
    hint to paste: FOLDER, the spec's output_dir, is quoted as the report line is."""
    from vertex_trainer.errors import UserError
    from vertex_trainer.local.run import hold_records

    base, record = str(tmp_path / folder), str(tmp_path / "records")
    first = hold_records(record, "fine-ci-1", base)
    try:
        with pytest.raises(UserError) as refused:
            hold_records(record, "fine-ci-1", base)
    finally:
        os.close(first)
    hint = str(refused.value.hint)
    line = hint[hint.index("(vertex-trainer") + 1 : hint.index(" --follow)") + len(" --follow")]
    assert shlex.split(line) == ["vertex-trainer", "logs", base, "--follow"]
