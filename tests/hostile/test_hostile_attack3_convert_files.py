"""`data convert` of a dataset someone else filled (an archive of photos, a shared folder or
bucket): each image file was read whole into memory, whatever it was. A symbolic link named
`big.png` to /dev/zero (an archive may hold one) made the run take 14 GB in 25 s and more until
it was killed; a FIFO named like an image held it for good; a 10 GB file was read whole before
Pillow looked at it. Now a local file that is not a regular file is rejected as unreadable
without being opened, and one whose listed size is over MAX_IMAGE_BYTES as too large without
being read (no file is read past that bound); the run goes on with the rest, as for any bad file.
"""

from __future__ import annotations

import os

import pytest
from PIL import Image

from tests.cli_support import edge_env
from tests.shared import cli_runner
from vertex_trainer.dataprep import pipeline


@pytest.fixture
def photos(tmp_path):
    for c in ("cat", "dog"):
        (tmp_path / "photos" / c).mkdir(parents=True)
        for i in range(2):
            Image.new("RGB", (16, 16), (40 * i, 0, 0)).save(tmp_path / "photos" / c / f"{i}.png")
    return tmp_path / "photos"


def _convert(tmp_path):
    done = cli_runner(edge_env(tmp_path), cwd=tmp_path)(
        "data", "convert", "photos", "records", "--shards", "1"
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    rejected = (tmp_path / "records" / "rejected.txt").read_text().splitlines()
    return done, dict(line.split("\t") for line in rejected)


@pytest.mark.timeout(180)
def test_a_fifo_or_an_oversize_file_named_like_an_image_is_rejected_unread(photos, tmp_path):
    os.mkfifo(photos / "dog" / "pipe.png")
    with open(photos / "cat" / "huge.png", "wb") as f:
        f.truncate(pipeline.MAX_IMAGE_BYTES + 1)  # sparse: its size is what counts
    done, rejected = _convert(tmp_path)
    assert rejected == {
        "photos/cat/huge.png": "over the 256 MiB an image may be",
        "photos/dog/pipe.png": "not a regular file (a FIFO, a device or a link to one)",
    }
    assert "rejected: 2 (" in done.stdout


@pytest.mark.timeout(180)
def test_a_link_to_a_device_is_rejected_unopened(photos, tmp_path):
    (photos / "dog" / "big.png").symlink_to("/dev/zero")
    _, rejected = _convert(tmp_path)
    assert rejected == {"photos/dog/big.png": "not a regular file (a FIFO, a device or a link to one)"}
    assert (tmp_path / "records" / "_SUCCESS").exists()
