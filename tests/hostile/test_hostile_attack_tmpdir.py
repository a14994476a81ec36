"""A local run without output_dir writes below <tmp>/vertex-trainer (local/layout.py), and /tmp is
shared by every user of the machine: a root another user made first (or a link planted there) would
hand them the runs' models, checkpoints and the bucket data fetched into the /gcs stand-in, to read
or to replace before you deploy them; and `report NAME` / `logs NAME` would show runs they planted.

The root is made 0700; one of yours left open is closed; one that is not yours (another user's, a
link) is exit 2 naming it before anything runs; runs found by name only below a root that no one
else can write to. "Another user" is the folder's owner differing from os.getuid(): the test
runs as any user, so it is shown by a uid that is not the one running the test."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from tests.cli_support import edge_env
from tests.shared import cli_runner, script_job
from vertex_trainer.errors import UserError
from vertex_trainer.local import layout

TASK = "import pathlib\npathlib.Path('ran').write_text('yes')\n"


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_default_root_is_made_private_and_an_open_one_of_yours_is_closed(tmp_path):
    run_dir = layout.default_run_dir("digits", "digits-1", tmp=str(tmp_path))
    root = tmp_path / "vertex-trainer"
    assert run_dir == str(root / "digits" / "digits-1")
    assert _mode(root) == 0o700
    root.chmod(0o777)  # made by an older version, or by hand
    layout.default_run_dir("digits", "digits-2", tmp=str(tmp_path))
    assert _mode(root) == 0o700


def test_a_root_that_is_a_link_is_refused(tmp_path):
    elsewhere = tmp_path / "planted"
    elsewhere.mkdir(mode=0o777)
    (tmp_path / "tmp").mkdir()
    (tmp_path / "tmp" / "vertex-trainer").symlink_to(elsewhere)
    with pytest.raises(UserError) as err:
        layout.default_run_dir("digits", "digits-1", tmp=str(tmp_path / "tmp"))
    assert str(tmp_path / "tmp" / "vertex-trainer") in err.value.message
    assert "output_dir" in err.value.message and "output_dir" in (err.value.hint or "")
    assert list(elsewhere.iterdir()) == []


def test_a_root_of_another_user_is_refused_and_its_runs_are_not_found_by_name(tmp_path, monkeypatch):
    root = tmp_path / "vertex-trainer"
    planted = root / "digits" / ".vertex-trainer" / "digits-x"
    layout.write_run_file(str(planted), run="digits-x", run_dir=str(root / "digits" / "digits-x"), job_id="j")
    (root / "digits" / "digits-x").mkdir()
    assert layout.find_run("digits", tmp=str(tmp_path)) is not None  # yours: found by its name
    mine = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: mine + 1)  # now the folder is another user's
    with pytest.raises(UserError) as err:
        layout.default_run_dir("digits", "digits-1", tmp=str(tmp_path))
    assert f"owned by another user (uid {mine})" in err.value.message
    assert layout.find_run("digits", tmp=str(tmp_path)) is None
    monkeypatch.undo()
    root.chmod(0o777)  # yours, but anyone may write into it: what it holds may be planted
    assert layout.find_run("digits", tmp=str(tmp_path)) is None


def test_submit_local_without_output_dir_is_exit_2_before_anything_runs(tmp_path, monkeypatch):
    spec = script_job(tmp_path, TASK, repository="us-docker.pkg.dev/p-1/r")
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    (shared / "vertex-trainer").symlink_to(tmp_path)  # planted before you ran
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    result = cli_runner(edge_env(tmp_path), cwd=tmp_path)("submit", spec, "--local")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "output_dir" in result.stderr and str(shared / "vertex-trainer") in result.stderr.replace("\n", "")
    assert not (tmp_path / "digits").exists() and not list(tmp_path.rglob("ran"))
