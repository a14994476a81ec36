"""The line `submit --local` ends with for the report, `report   vertex-trainer report FOLDER`, is
there to be pasted into a shell. FOLDER is the spec's output_dir: a spec from a pull request with
`output_dir: runs/x$(touch PWNED)` made a pasted line run `touch PWNED` (and a folder with a
space made it two arguments). The folder is now shell-quoted; the tests read the line back as
a shell would (shlex.split) and find the one folder the run wrote."""

from __future__ import annotations

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
