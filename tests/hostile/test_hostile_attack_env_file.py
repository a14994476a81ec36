"""`dev sandbox --env-file PATH` writes the sandbox's variables, its token among them, 0600 and
atomically. The file written first used to be `PATH.tmp-PID`, a name anyone can guess: in a folder
another user can write to, a file of theirs (or a link to one) at that name got the token, opened
with O_CREAT|O_TRUNC and its owner's mode kept. The first file is now mkstemp's: new, 0600, never a
link; what was planted is left as it was."""

from __future__ import annotations

import os
import stat

import pytest

from vertex_trainer.sandbox import services

TEXT = "VERTEX_TRAINER_EMULATOR_TOKEN=s3cr3t-token\n"


@pytest.mark.parametrize("planted", ["link", "file"])
def test_a_file_planted_at_the_guessable_name_does_not_get_the_token(tmp_path, planted):
    theirs = tmp_path / "theirs.txt"
    theirs.write_text("")
    theirs.chmod(0o666)
    path = tmp_path / "sandbox.env"
    guess = tmp_path / f"sandbox.env.tmp-{os.getpid()}"
    if planted == "link":
        guess.symlink_to(theirs)
    else:
        guess.write_text("")
        guess.chmod(0o666)
    services._write_atomically(str(path), TEXT)
    assert theirs.read_text() == "" and (planted == "link" or guess.read_text() == "")
    assert path.read_text() == TEXT and not path.is_symlink()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["theirs.txt", guess.name, "sandbox.env"])


def test_it_replaces_an_earlier_file_of_any_mode(tmp_path):
    path = tmp_path / "sandbox.env"
    path.write_text("OLD=1\n")
    path.chmod(0o644)
    services._write_atomically(str(path), TEXT)
    assert path.read_text() == TEXT and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["sandbox.env"]
