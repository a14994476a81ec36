"""A careless user gives `report -o` a file that is not a report (issue 42, H2 round 3): the run's
own `metrics.json` (tab completion in the run's folder), the spec, a notes file.

The report was written over it without a word: `report runs/q -o runs/q/metrics.json` replaced
the run's figures with an HTML page, exit 0. Now a file that no report wrote (the page carries
`<meta name="generator" content="vertex-trainer report">`, the PNG the same Software text) is
exit 2 naming -o and the file, before the run is read, and left as it was; a report written
before is replaced as always, and a folder is refused with a file name inside it as the fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "report" / "data"


@pytest.fixture
def run(tmp_path) -> Path:
    shutil.copytree(DATA / ".vertex-trainer", tmp_path / ".vertex-trainer")
    return Path(shutil.copytree(DATA / "quickstart", tmp_path / "quickstart"))


@pytest.mark.parametrize("victim", ["metrics.json", "trainer_config.json"])
def test_o_naming_a_file_of_the_run_is_exit_2_and_the_file_is_kept(run_cli, run, victim):
    target = run / victim
    before = target.read_bytes()
    proc = run_cli("report", str(run), "-o", str(target))
    assert proc.returncode == 2, proc.stderr
    assert f"-o {target} is a file that no report wrote" in proc.stderr
    assert "new file name" in proc.stderr
    assert target.read_bytes() == before


def test_o_naming_some_other_file_is_refused_in_either_format(run_cli, run, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("what I tried on Tuesday\n")
    for fmt in ("html", "png"):
        proc = run_cli("report", str(run), "--format", fmt, "-o", str(notes))
        assert proc.returncode == 2, proc.stderr
        assert notes.read_text() == "what I tried on Tuesday\n"


def test_a_report_written_before_is_replaced_as_always(run_cli, run, tmp_path):
    for fmt in ("html", "png"):
        out = tmp_path / f"report.{fmt}"
        for _ in range(2):
            proc = run_cli("report", str(run), "--format", fmt, "-o", str(out))
            assert proc.returncode == 0, proc.stderr
            assert proc.stdout.strip() == str(out)
    assert (tmp_path / "report.html").read_text().count("<svg") == 6
    assert (tmp_path / "report.png").read_bytes().startswith(b"\x89PNG")


def test_o_naming_a_folder_is_exit_2_with_a_file_in_it_as_the_fix(run_cli, run):
    proc = run_cli("report", str(run), "-o", str(run))
    assert proc.returncode == 2, proc.stderr
    assert f"-o {run} is a folder" in proc.stderr
    assert f"-o {run / 'report.html'}" in proc.stderr


def test_a_mistyped_run_folder_is_named_as_one_with_the_folder_meant(cli_env, run, tmp_path):
    """`report quickstrat` (no slash) was taken for a job: "'quickstrat' is not a job: pass
    projects/P/locations/R/customJobs/ID, ...", which named neither the folder nor the typo."""
    from tests.shared import cli_runner

    proc = cli_runner(cli_env, cwd=tmp_path)("report", "quickstrat")
    assert proc.returncode == 2, proc.stderr
    assert "report: quickstrat holds no run (no such directory here, and not a job name or id)" in proc.stderr
    assert "hint: did you mean quickstart?" in proc.stderr
