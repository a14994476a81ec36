"""A careless user converts images into a folder inside the image tree (issue 42, H2 round 2):
`data convert photos photos/records`.

The first run is fine; the next one (new photos added, `--overwrite`) lists `photos/records` as
one more class folder: labels.txt gains a class "records", num_classes goes from 2 to 3, and its
TFRecords are read as images (rejected), silently: a model trained on it has a class that no
image is. Now OUT_DIR inside IMAGE_DIR (or --eval-dir), a class folder included, is exit 2 before
anything is listed or written, with a folder beside the images as the fix; gs:// alike.
"""

from __future__ import annotations

import pytest

from tests.cli_support import edge_env
from tests.shared import cli_runner


@pytest.fixture
def convert(tmp_path):
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    for c in ("cat", "dog"):
        (tmp_path / "photos" / c).mkdir(parents=True)
    return lambda *args: run("data", "convert", *args)


@pytest.mark.parametrize("out", ["photos/records", "photos/cat/records", "./photos/records/"])
def test_out_dir_inside_the_image_tree_is_exit_2_before_anything(convert, tmp_path, out):
    done = convert("photos", out, "--shards", "1")
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert (
        "is inside IMAGE_DIR 'photos': a later convert of photos would take it for one more class"
        in done.stderr
    )
    assert "hint: write the dataset beside the images, e.g. photos-records" in done.stderr
    assert sorted(p.name for p in (tmp_path / "photos").iterdir()) == ["cat", "dog"]  # nothing written


def test_inside_the_eval_tree_too(convert, tmp_path):
    (tmp_path / "val" / "cat").mkdir(parents=True)
    done = convert("photos", "val/records", "--eval-dir", "val", "--dry-run")
    assert done.returncode == 2 and "is inside --eval-dir 'val'" in done.stderr


def test_gs_paths_are_compared_by_name(convert):
    inside = convert("gs://raw/photos", "gs://raw/photos/records", "--dry-run")
    assert (
        inside.returncode == 2
        and "hint: write the dataset beside the images, e.g. gs://raw/photos-records" in (inside.stderr)
    )
    beside = convert("gs://raw/photos", "gs://raw/photos-records", "--dry-run")  # a prefix, not a folder
    assert beside.returncode == 0, beside.stderr


def test_beside_the_images_is_fine(convert):
    done = convert("photos", "photos-records", "--dry-run")
    assert done.returncode == 0, done.stderr
