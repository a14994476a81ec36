"""Fixtures for `data convert`: a class-per-folder tree of real photos (scikit-learn's two bundled
sample images, china.jpg and flower.jpg, cut into crops) with the usual bad files, an in-process
CLI, and one conversion of it shared by the tests that only read the output."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.cli_support import CliResult, run_in_process
from vertex_trainer.dataprep import records

CROPS = 12  # per class
SIDE = 80  # crop size (px)


@dataclass
class Tree:
    root: Path
    good: dict[str, str] = field(default_factory=dict)  # "<class>/<file>" -> class
    bad: dict[str, str] = field(default_factory=dict)  # "<class>/<file>" -> reason prefix
    reencoded: set[str] = field(default_factory=set)  # good files stored re-encoded

    @property
    def classes(self) -> list[str]:
        return sorted({rel.split("/")[0] for rel in self.good})


def make_tree(root: Path, *, crops: int = CROPS, seed: int = 0, bad: bool = True) -> Tree:
    """Three classes: `temple` (china.jpg, JPEG and PNG), `flower` (flower.jpg, PNG) and
    `bw_flower` (grayscale JPEG), plus a CMYK JPEG, a PNG named .jpg, and bad files."""
    import numpy as np
    from PIL import Image

    photos = Path(__file__).resolve().parents[1] / "data" / "photos"  # (their licence: README.md there)
    china, flower = (
        np.asarray(Image.open(photos / name).convert("RGB")) for name in ("china.jpg", "flower.jpg")
    )
    rng = np.random.default_rng(seed)
    tree = Tree(root)
    plan = (
        ("temple", china, "RGB", ("JPEG", "PNG")),
        ("flower", flower, "RGB", ("PNG",)),
        ("bw_flower", flower, "L", ("JPEG",)),
    )
    for cls, photo, mode, formats in plan:
        (root / cls).mkdir(parents=True, exist_ok=True)
        for i in range(crops):
            y = int(rng.integers(0, photo.shape[0] - SIDE))
            x = int(rng.integers(0, photo.shape[1] - SIDE))
            im = Image.fromarray(photo[y : y + SIDE, x : x + SIDE]).convert(mode)
            fmt = formats[i % len(formats)]
            name = f"{cls}-{i:02d}.{'jpg' if fmt == 'JPEG' else 'png'}"
            im.save(root / cls / name, format=fmt)
            tree.good[f"{cls}/{name}"] = cls
    crop = Image.fromarray(china[:SIDE, :SIDE])
    crop.convert("CMYK").save(root / "temple" / "cmyk.jpg", format="JPEG")
    tree.good["temple/cmyk.jpg"] = "temple"
    tree.reencoded.add("temple/cmyk.jpg")
    crop.save(root / "flower" / "png-named.jpg", format="PNG")  # a PNG with a .jpg name: kept
    tree.good["flower/png-named.jpg"] = "flower"
    if bad:
        jpeg = (root / "temple" / "temple-00.jpg").read_bytes()
        (root / "temple" / "truncated.jpg").write_bytes(jpeg[: len(jpeg) // 2])
        (root / "temple" / "random.jpg").write_bytes(bytes(rng.integers(0, 256, 500, dtype=np.uint8)))
        (root / "flower" / "empty.png").write_bytes(b"")
        crop.save(root / "flower" / "anim.gif", format="GIF")
        (root / "bw_flower" / "notes.txt").write_text("not an image")
        tree.bad.update(
            {
                "temple/truncated.jpg": "corrupt or truncated JPEG",
                "temple/random.jpg": "not an image",
                "flower/empty.png": "empty file",
                "flower/anim.gif": "GIF image",
                "bw_flower/notes.txt": "not an image",
            }
        )
    (root / "README.txt").write_text("a file in no class folder")
    (root / ".ipynb_checkpoints").mkdir()  # hidden: not a class
    (root / "temple" / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")  # hidden: not listed, not rejected
    return tree


run_cli = run_in_process  # the CLI in-process, as the console script runs it (tests/cli_support.py)


def read_split(out: Path, split: str) -> dict[str, list[dict]]:
    """{shard file name: [decoded Example, ...]} of one split, with our own reader (no TF)."""
    shards = {}
    for path in sorted(out.glob(f"{split}-*")):
        with open(path, "rb") as f:
            shards[path.name] = [records.decode_example(r) for r in records.read_records(f)]
    return shards


def rel_of(example: dict) -> str:
    return f"{example['image/class/synset'][0].decode()}/{example['image/filename'][0].decode()}"


@dataclass
class Converted:
    tree: Tree
    out: Path
    result: CliResult
    writes: list[str]


@pytest.fixture(scope="session")
def tree(tmp_path_factory) -> Tree:
    return make_tree(tmp_path_factory.mktemp("photos") / "images")


@pytest.fixture(scope="session")
def converted(tree, tmp_path_factory) -> Converted:
    """The tree converted once (3 train shards, 25% validation, seed 7); every write recorded."""
    from vertex_trainer.dataprep import pipeline

    out = tmp_path_factory.mktemp("converted") / "data"
    writes: list[str] = []
    real = pipeline.open_for_write

    def recording(path):
        writes.append(path)
        return real(path)

    pipeline.open_for_write = recording  # the DirectRunner runs the DoFns in this process
    try:
        result = run_cli(
            "data", "convert", tree.root, out, "--shards", "3", "--eval-fraction", "0.25", "--seed", "7"
        )
    finally:
        pipeline.open_for_write = real
    assert result.code == 0, result.err
    return Converted(tree, out, result, writes)


@pytest.fixture
def python() -> str:
    return sys.executable
