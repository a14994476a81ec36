"""`report` writes its page to -o, or to report-<name>.html in the working directory, and wrote
through a symbolic link there: a link someone else planted in a shared folder (a project's
reports folder, a shared checkout), pointing at a file of yours that does not exist yet
(~/.ssh/authorized_keys, an autostart entry), made the page that file, lines of the run's spec
(which the run's writer chose) and all. check_out looked only at what the link points to, and
nothing is there. A link at the page's place is now exit 2 naming it and where it points; the
page is opened with O_NOFOLLOW, so a link made after that look is refused the same way.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.cli_support import edge_env
from tests.shared import cli_runner
from vertex_trainer import api
from vertex_trainer.errors import UserError

DATA = Path(__file__).resolve().parents[1] / "report" / "data"


@pytest.fixture
def run(tmp_path) -> Path:
    shutil.copytree(DATA / ".vertex-trainer", tmp_path / ".vertex-trainer")
    run = Path(shutil.copytree(DATA / "quickstart", tmp_path / "quickstart"))
    shutil.rmtree(run / "logs")  # no TensorBoard files: no TensorFlow
    return run


def test_a_link_at_the_default_page_is_refused_and_its_target_never_made(run, tmp_path):
    victim = tmp_path / "home" / ".ssh" / "authorized_keys"
    victim.parent.mkdir(parents=True)
    (tmp_path / "report-quickstart.html").symlink_to(victim)
    done = cli_runner(edge_env(tmp_path), cwd=tmp_path)("report", "quickstart")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"-o report-quickstart.html is a symbolic link (to {victim})" in done.stderr
    assert not victim.exists() and os.listdir(victim.parent) == []


@pytest.mark.parametrize("fmt", ["html", "png"])
def test_a_link_given_as_out_is_refused_even_to_a_report(run, tmp_path, fmt):
    page = api.report(str(run), str(tmp_path / f"first.{fmt}"))  # a report of ours
    link = tmp_path / f"again.{fmt}"
    link.symlink_to(page)
    before = Path(page).read_bytes()
    with pytest.raises(UserError) as e:
        api.report(str(run), str(link))
    assert e.value.exit_code == 2 and "is a symbolic link" in e.value.message
    assert Path(page).read_bytes() == before and link.is_symlink()


def test_a_link_made_after_the_look_is_refused_by_the_open(run, tmp_path, monkeypatch):
    from vertex_trainer.reporting import page, run_data

    data = run_data.from_run_dir(str(run))
    victim = tmp_path / "victim"
    link = tmp_path / "page.html"
    real_check = page.check_out

    def look_then_link(out: str) -> None:  # the look passes; the link appears right after it
        real_check(out)
        link.symlink_to(victim)

    monkeypatch.setattr(page, "check_out", look_then_link)
    with pytest.raises(UserError) as e:
        page.write(data, str(link))
    assert "is a symbolic link" in e.value.message and not victim.exists()
