"""`vertex-trainer data synth|convert`: the CLI over the trainer's data tools."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.trainer


def _class_means(pattern: str) -> dict[int, np.ndarray]:
    import tensorflow as tf

    sums: dict[int, list] = {}
    for record in tf.data.TFRecordDataset(tf.io.gfile.glob(pattern)):
        ex = tf.train.Example.FromString(record.numpy())
        label = ex.features.feature["image/class/label"].int64_list.value[0]
        pixels = tf.io.decode_jpeg(ex.features.feature["image/encoded"].bytes_list.value[0]).numpy()
        sums.setdefault(label, []).append(pixels.reshape(-1, 3).mean(axis=0))
    return {k: np.mean(v, axis=0) for k, v in sums.items()}


def test_synth_eval_split_shares_the_train_distribution(cli, tmp_path):
    out = tmp_path / "data"
    result = cli(
        "data",
        "synth",
        out,
        "--examples",
        "96",
        "--shards",
        "2",
        "--image-size",
        "16",
        "--num-classes",
        "3",
        "--eval-examples",
        "48",
        "--seed",
        "5",
    )
    assert result.code == 0, result.err
    assert sorted(p.name.split("-")[0] for p in out.iterdir()) == ["train", "train", "validation"]
    train, val = _class_means(str(out / "train-*")), _class_means(str(out / "validation-*"))
    assert set(train) == set(val) == {0, 1, 2}
    for label in train:  # same class colour in both splits (a model trained on one can score on the other)
        assert np.abs(train[label] - val[label]).max() < 15, (label, train[label], val[label])


def test_convert_refuses_a_missing_folder(cli, tmp_path):
    result = cli("data", "convert", tmp_path / "nope", tmp_path / "out")
    assert result.code == 2 and "IMAGE_DIR" in result.err


def test_convert_class_folders(cli, tmp_path):
    from PIL import Image

    for cls, colour in (("cat", (200, 30, 30)), ("dog", (30, 30, 200))):
        (tmp_path / "img" / cls).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (12, 12), colour).save(tmp_path / "img" / cls / f"{i}.jpg")
    result = cli("data", "convert", tmp_path / "img", tmp_path / "out", "--shards", "2")
    assert result.code == 0, result.err
    means = _class_means(str(tmp_path / "out" / "train-*"))
    assert means[0][0] > 150 and means[1][2] > 150  # sorted folders: cat=0, dog=1
