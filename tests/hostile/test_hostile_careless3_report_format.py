"""A careless user's report whose file name and format disagree (issue 42, HC round 4).

`report RUN --format png -o report.html` wrote a PNG into report.html (the browser showed
garbage), `--format html -o plots.png` a page into plots.png (no image viewer opens it), and
`report RUN -o plots.png` without --format, the most natural way to ask for the plots, the page
too: --format defaulted to html whatever -o said. Now the suffix of -o chooses the format when
--format is left out, and a --format the suffix contradicts is exit 2 before anything is read
or written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "report" / "data"
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def run(tmp_path) -> Path:
    shutil.copytree(DATA / ".vertex-trainer", tmp_path / ".vertex-trainer")
    return Path(shutil.copytree(DATA / "quickstart", tmp_path / "quickstart"))


@pytest.mark.parametrize(
    ("fmt", "name", "said"), [("png", "report.html", "a PNG image"), ("html", "plots.png", "an HTML page")]
)
def test_a_format_the_file_name_contradicts_is_exit_2_and_nothing_is_written(
    run_cli, run, tmp_path, fmt, name, said
):
    out = tmp_path / name
    proc = run_cli("report", str(run), "--format", fmt, "-o", str(out))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"report: --format {fmt} writes {said}, but -o {out} names" in proc.stderr
    assert f"-o {tmp_path / Path(name).stem}.{fmt}, or leave --format out" in proc.stderr
    assert not out.exists()


def test_without_format_a_png_name_gets_the_plots(run_cli, run, tmp_path):
    out = tmp_path / "plots.PNG"
    proc = run_cli("report", str(run), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes().startswith(PNG)


def test_without_format_an_htm_name_or_no_suffix_gets_the_page(run_cli, run, tmp_path):
    for name in ("page.htm", "report"):
        proc = run_cli("report", str(run), "-o", str(tmp_path / name))
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / name).read_text().startswith("<!DOCTYPE html>")


def test_a_format_given_for_a_name_of_no_known_suffix_is_followed(run_cli, run, tmp_path):
    out = tmp_path / "plots.img"
    proc = run_cli("report", str(run), "--format", "png", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes().startswith(PNG)
