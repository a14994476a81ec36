"""`data convert` on the DirectRunner: every good photo in exactly one record, bad files listed,
labels, manifest, the marker last, reproducible shards, splits, resizing, re-runs."""

from __future__ import annotations

import io
import json
from collections import Counter

import pytest
from PIL import Image

from .conftest import make_tree, read_split, rel_of, run_cli


def test_every_good_image_is_in_exactly_one_record(converted):
    tree, out = converted.tree, converted.out
    train, val = read_split(out, "train"), read_split(out, "validation")
    assert list(train) == ["train-00000-of-00003", "train-00001-of-00003", "train-00002-of-00003"]
    assert list(val) == ["validation-00000-of-00001"]
    stored = [ex for shards in (train, val) for examples in shards.values() for ex in examples]
    rels = Counter(rel_of(ex) for ex in stored)
    assert set(rels) == set(tree.good) and set(rels.values()) == {1}, rels
    for ex in stored:
        rel = rel_of(ex)
        data = ex["image/encoded"][0]
        source = (tree.root / rel).read_bytes()
        assert (data == source) == (rel not in tree.reencoded), rel  # stored as they are
        with Image.open(io.BytesIO(data)) as im:
            assert im.format == ex["image/format"][0].decode() and im.mode in ("RGB", "L")
            assert [ex["image/height"][0], ex["image/width"][0]] == [im.height, im.width]
    # Splits are seeded per file: about a quarter of each class, none empty.
    assert 0.1 < sum(len(v) for v in val.values()) / len(stored) < 0.45


def test_labels_match_labels_txt(converted):
    labels = (converted.out / "labels.txt").read_text().splitlines()
    assert labels == converted.tree.classes == ["bw_flower", "flower", "temple"]
    for shards in (read_split(converted.out, "train"), read_split(converted.out, "validation")):
        for examples in shards.values():
            for ex in examples:
                label = ex["image/class/label"][0]
                assert (
                    labels[label] == ex["image/class/synset"][0].decode() == converted.tree.good[rel_of(ex)]
                )


def test_bad_files_are_listed_not_fatal(converted):
    lines = (converted.out / "rejected.txt").read_text().splitlines()
    got = {line.split("\t")[0]: line.split("\t")[1] for line in lines}
    assert set(got) == {str(converted.tree.root / rel) for rel in converted.tree.bad}
    for rel, reason in converted.tree.bad.items():
        assert got[str(converted.tree.root / rel)].startswith(reason), (rel, got)
    assert lines == sorted(lines)


def test_manifest_summary_and_marker_written_last(converted):
    out, tree = converted.out, converted.tree
    manifest = json.loads((out / "manifest.json").read_text())
    splits = manifest["splits"]
    assert splits["train"]["examples"] + splits["validation"]["examples"] == len(tree.good)
    assert [s["file"] for s in splits["train"]["shards"]] == sorted(read_split(out, "train"))
    assert sum(s["examples"] for s in splits["train"]["shards"]) == splits["train"]["examples"]
    assert manifest["labels"] == tree.classes and manifest["num_classes"] == 3
    assert manifest["rejected"]["count"] == len(tree.bad)
    assert manifest["rejected"]["by_kind"] == {"corrupt": 1, "empty": 1, "not-an-image": 2, "unsupported": 1}
    per_class = Counter(tree.good.values())
    assert {
        c: splits["train"]["per_class"][c] + splits["validation"]["per_class"][c] for c in per_class
    } == per_class
    assert manifest["source"]["image_dir"] == str(tree.root)
    assert manifest["source"]["files"] == len(tree.good) + len(tree.bad)
    assert manifest["trainer"] == {
        "train_data": f"{out}/train-*",
        "eval_data": f"{out}/validation-*",
        "num_classes": 3,
    }
    assert splits["train"]["reencoded"] + splits["validation"]["reencoded"] == 1  # the CMYK one

    # The write order: every shard, then labels, rejected, manifest, and the marker last.
    names = [w.rsplit("/", 1)[1] for w in converted.writes]
    assert names[-4:] == ["labels.txt", "rejected.txt", "manifest.json", "_SUCCESS"]
    assert sorted(names[:-4]) == sorted(p.name for p in out.glob("*-of-*"))
    assert (out / "_SUCCESS").read_bytes() == b""
    marker = (out / "_SUCCESS").stat().st_mtime_ns
    assert all(p.stat().st_mtime_ns <= marker for p in out.iterdir())

    text = converted.result.out
    assert f"converted {len(tree.good)} images" in text and "images/s" in text
    assert "rejected: 5 (1 corrupt, 1 empty, 2 not-an-image, 1 unsupported)" in text
    assert "bw_flower" in text and "trainer.num_classes: 3" in text
    assert "1 file(s) directly in" in converted.result.err  # README.txt is in no class folder


def test_bad_files_are_counted_by_beam(tmp_path):
    tree = make_tree(tmp_path / "img", crops=1)
    result = run_cli("data", "convert", tree.root, tmp_path / "out", "--output", "json")
    assert result.code == 0, result.err
    counters = json.loads(result.out)["counters"]
    assert counters["files_listed"] == len(tree.good) + len(tree.bad)
    assert counters["images_written"] == len(tree.good) and counters["rejected"] == len(tree.bad)
    assert {k: v for k, v in counters.items() if k.startswith("rejected_")} == {
        "rejected_corrupt": 1,
        "rejected_empty": 1,
        "rejected_not-an-image": 2,
        "rejected_unsupported": 1,
    }
    assert counters["bytes_read"] == sum((tree.root / rel).stat().st_size for rel in [*tree.good, *tree.bad])


def test_same_seed_same_bytes(converted, tmp_path):
    again = tmp_path / "again"
    result = run_cli(
        "data",
        "convert",
        converted.tree.root,
        again,
        "--shards",
        "3",
        "--eval-fraction",
        "0.25",
        "--seed",
        "7",
    )
    assert result.code == 0, result.err
    shards = sorted(p.name for p in converted.out.glob("*-of-*"))
    assert shards == sorted(p.name for p in again.glob("*-of-*"))
    for name in shards:
        assert (again / name).read_bytes() == (converted.out / name).read_bytes(), name
    assert (again / "rejected.txt").read_text() == (converted.out / "rejected.txt").read_text()

    other = tmp_path / "other"
    assert run_cli("data", "convert", converted.tree.root, other, "--shards", "3", "--seed", "8").code == 0
    order = [rel_of(ex) for examples in read_split(other, "train").values() for ex in examples]
    assert sorted(order) == sorted(converted.tree.good)
    first = [rel_of(ex) for ex in read_split(converted.out, "train")["train-00000-of-00003"]]
    assert order[: len(first)] != first


def test_eval_dir_uses_train_labels(tmp_path):
    train = make_tree(tmp_path / "train", crops=3, bad=False)
    val = make_tree(tmp_path / "val", crops=2, seed=1, bad=False)
    import shutil

    shutil.rmtree(val.root / "bw_flower")  # validation without one class: labels still from train
    out = tmp_path / "out"
    result = run_cli("data", "convert", train.root, out, "--eval-dir", val.root, "--output", "json")
    assert result.code == 0, result.err
    manifest = json.loads(result.out)["manifest"]
    assert manifest["labels"] == ["bw_flower", "flower", "temple"]
    assert manifest["splits"]["validation"]["per_class"] == {"bw_flower": 0, "flower": 3, "temple": 3}
    assert "no folder for 1 class(es), e.g. bw_flower" in result.err
    for ex in read_split(out, "validation")["validation-00000-of-00001"]:
        assert ex["image/class/label"][0] == manifest["labels"].index(ex["image/class/synset"][0].decode())
    assert {rel_of(ex) for exs in read_split(out, "train").values() for ex in exs} == set(train.good)

    (val.root / "zebra").mkdir()
    result = run_cli("data", "convert", train.root, tmp_path / "out2", "--eval-dir", val.root)
    assert result.code == 2 and "zebra" in result.err and "not in IMAGE_DIR" in result.err
    assert not (tmp_path / "out2").exists()


def test_max_side_resizes_and_reencodes(tmp_path):
    tree = make_tree(tmp_path / "img", crops=2, bad=False)
    out = tmp_path / "out"
    result = run_cli("data", "convert", tree.root, out, "--max-side", "48", "--jpeg-quality", "80")
    assert result.code == 0, result.err
    examples = [ex for exs in read_split(out, "train").values() for ex in exs]
    assert len(examples) == len(tree.good)
    for ex in examples:
        with Image.open(io.BytesIO(ex["image/encoded"][0])) as im:
            assert im.format == "JPEG" and max(im.size) == 48 and ex["image/format"] == [b"JPEG"]
    assert json.loads((out / "manifest.json").read_text())["splits"]["train"]["resized"] == len(tree.good)


def test_an_existing_dataset_is_kept_unless_overwrite(tmp_path):
    tree = make_tree(tmp_path / "img", crops=2, bad=False)
    out = tmp_path / "out"
    assert run_cli("data", "convert", tree.root, out, "--shards", "4").code == 0
    result = run_cli("data", "convert", tree.root, out, "--shards", "2")
    assert result.code == 2 and "already holds a dataset" in result.err and "--overwrite" in result.err
    result = run_cli("data", "convert", tree.root, out, "--shards", "2", "--overwrite")
    assert result.code == 0, result.err
    assert sorted(p.name for p in out.glob("train-*")) == ["train-00000-of-00002", "train-00001-of-00002"]


def test_nothing_convertible_writes_no_marker(tmp_path):
    (tmp_path / "img" / "cls").mkdir(parents=True)
    (tmp_path / "img" / "cls" / "a.jpg").write_bytes(b"")
    (tmp_path / "img" / "cls" / "b.jpg").write_bytes(b"garbage")
    out = tmp_path / "out"
    result = run_cli("data", "convert", tmp_path / "img", out, "--marker", "READY")
    assert result.code == 2 and "no image" in result.err and "no marker" in result.err
    assert not (out / "READY").exists() and not (out / "manifest.json").exists()
    assert len((out / "rejected.txt").read_text().splitlines()) == 2


@pytest.mark.parametrize(
    "args,message",
    [
        (["--eval-fraction", "0.2", "--eval-dir", "x"], "pass one"),
        (["--eval-fraction", "1.5"], "below 1"),
        (["--shards", "0"], "at least 1"),
        (["--marker", "a/b"], "plain object name"),
        (["--runner", "dataflow", "--project", "p", "--region", "r"], "must be a gs:// path"),
    ],
)
def test_bad_requests_are_exit_2(tmp_path, args, message):
    result = run_cli("data", "convert", tmp_path, tmp_path / "out", *args)
    assert result.code == 2 and message in result.err, result.err
    assert not (tmp_path / "out").exists()


def test_missing_or_empty_image_dir(tmp_path):
    result = run_cli("data", "convert", tmp_path / "nope", tmp_path / "out")
    assert result.code == 2 and "IMAGE_DIR" in result.err and "not a directory" in result.err
    (tmp_path / "empty").mkdir()  # (OUT_DIR beside it: one inside is refused first, as inside)
    result = run_cli("data", "convert", tmp_path / "empty", tmp_path / "out")
    assert result.code == 2 and "no class folders" in result.err
