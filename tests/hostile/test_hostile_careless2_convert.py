"""A careless user converts a tree with class folders that hold no image (issue 42, H2 round 3):
an empty folder made ahead of time, a folder of notes (every file rejected as not an image).

Each was still a class: labels.txt listed it, the summary's last line said `trainer.num_classes:
4` and the run ended with `_SUCCESS`, so the model trained on it had outputs that no image ever
teaches, and nothing but two zeros in the class table said so. Now the summary warns, naming each
such class and its label, and says how to leave them out; a tree where every class has an image
says nothing more."""

from __future__ import annotations

import pytest
from PIL import Image

from tests.cli_support import edge_env
from tests.shared import cli_runner


@pytest.fixture
def convert(tmp_path):
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    for c, n in (("cat", 3), ("dog", 2)):
        (tmp_path / "photos" / c).mkdir(parents=True)
        for i in range(n):
            Image.new("RGB", (16, 16), (40 * i, 0, 0)).save(tmp_path / "photos" / c / f"{i}.png")
    return lambda *args: run("data", "convert", *args)


def test_classes_without_an_image_are_named_with_their_labels(convert, tmp_path):
    (tmp_path / "photos" / "bird").mkdir()  # empty: label 0
    (tmp_path / "photos" / "notes").mkdir()  # every file rejected: label 3
    (tmp_path / "photos" / "notes" / "todo.txt").write_text("label the birds\n")
    done = convert("photos", "records", "--shards", "1")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "records" / "labels.txt").read_text().split() == ["bird", "cat", "dog", "notes"]
    assert (
        "warning: 2 of 4 classes have no training image: bird (label 0), notes (label 3); "
        "num_classes 4 counts them" in done.stdout
    )
    assert "move those folders out of IMAGE_DIR and convert again with --overwrite" in done.stdout


def test_every_class_with_an_image_says_nothing_more(convert):
    done = convert("photos", "records", "--shards", "1")
    assert done.returncode == 0, done.stderr
    assert "trainer.num_classes: 2" in done.stdout and "warning" not in done.stdout
