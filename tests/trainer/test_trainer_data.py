"""The input pipeline and the data tools: shapes, dtypes, labels, sharding, corrupt records."""

from __future__ import annotations

import dataclasses
import io
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from trainer import datagen
from trainer.config import parse_flags
from trainer.plan import count_steps

from .conftest import Lazy

pytestmark = pytest.mark.trainer


tf = Lazy("tensorflow")
data = Lazy("trainer.data")  # imports TensorFlow
corrupt = Lazy("trainer.corrupt")  # naming a corrupt record (imports TensorFlow)


def features() -> dict:
    return {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    }


def stored(paths) -> list[tuple[bytes, int]]:
    out = []
    for record in datagen.iter_records(paths):
        ex = tf.io.parse_single_example(record, features())
        out.append((ex["image/encoded"].numpy(), int(ex["image/class/label"])))
    return out


def test_synthesize_writes_valid_jpeg_in_imagenet_layout(tmp_path):
    paths = datagen.synthesize(
        str(tmp_path), examples=20, shards=3, image_size=12, num_classes=5, eval_examples=6
    )
    assert [Path(p).name for p in paths] == [
        "train-00000-of-00003",
        "train-00001-of-00003",
        "train-00002-of-00003",
        "validation-00000-of-00001",
    ]
    train = stored(paths[:3])
    assert len(train) == 20 and len(stored(paths[3:])) == 6
    for encoded, label in train:
        with Image.open(io.BytesIO(encoded)) as im:
            assert (im.format, im.size, im.mode) == ("JPEG", (12, 12), "RGB")
        assert 0 <= label < 5
    ex = tf.train.Example.FromString(next(datagen.iter_records(paths[:1])))
    keys = set(ex.features.feature)
    assert {"image/encoded", "image/class/label", "image/format", "image/height", "image/width"} <= keys


def test_synthesize_is_seeded(tmp_path):
    a = datagen.synthesize(str(tmp_path / "a"), examples=5, shards=1, image_size=8, num_classes=3, seed=4)
    b = datagen.synthesize(str(tmp_path / "b"), examples=5, shards=1, image_size=8, num_classes=3, seed=4)
    assert stored(a) == stored(b)


# Converting class-per-folder images (data convert) is tested in tests/dataprep.


def test_eval_pipeline_shapes_dtypes_and_labels(synth_data):
    files = data.list_files(f"{synth_data}/validation-*")
    cfg = data.PipelineConfig(image_size=16, num_classes=4, training=False, deterministic=True)
    batches = list(data.build_dataset(files, cfg, 8))
    assert len(batches) == 4  # 32 eval examples, whole batches only
    for images, labels in batches:
        assert images.shape == (8, 16, 16, 3) and images.dtype == tf.uint8
        assert labels.shape == (8,) and labels.dtype == tf.int32
    got = np.concatenate([labels.numpy() for _, labels in batches])
    assert got.tolist() == [label for _, label in stored(files)]
    # Pixels are the decoded image, not zeros: synthetic images are a class colour plus noise.
    assert float(tf.reduce_mean(tf.cast(batches[0][0], tf.float32))) > 20
    # The listing behind gs:// patterns (and any a local check left over: trainer/plan.py).
    with pytest.raises(data.DataError, match=re.escape(f"no files match {synth_data}/test-*")):
        data.list_files(f"{synth_data}/validation-*,{synth_data}/test-*")


def test_training_pipeline_repeats_shuffles_and_offsets_labels(synth_data):
    files = data.list_files(f"{synth_data}/train-*")
    labels = [label for _, label in stored(files)]
    cfg = data.PipelineConfig(image_size=20, num_classes=4, training=True, label_offset=0, seed=3)
    seen = np.concatenate([y.numpy() for _, y in data.build_dataset(files, cfg, 16).take(12)])
    assert len(seen) == 192 > len(labels)  # repeats past one epoch
    assert seen[:128].tolist() != labels and sorted(seen[:128].tolist()) != seen[:128].tolist()
    # With a label offset of 1, stored label 0 becomes -1: out of range, so it fails.
    off = data.PipelineConfig(image_size=20, num_classes=4, training=False, label_offset=1)
    with pytest.raises(tf.errors.InvalidArgumentError) as err:
        for _ in data.build_dataset(files, off, 16):
            pass
    assert corrupt.is_bad_record(err.value)
    # The hot path only says a record failed; the scan names the file, the record and why.
    assert "label 0 - label_offset 1 is outside [0, 4)" in corrupt.find_corrupt_record(files, off)


def test_sharding_by_file_and_by_record(synth_data):
    files = data.list_files(f"{synth_data}/train-*")
    shards = [data.shard_files(files, num_shards=2, index=i, seed=5) for i in range(2)]
    assert not shards[0][1] and not shards[1][1]
    assert sorted(shards[0][0] + shards[1][0]) == sorted(files) and not set(shards[0][0]) & set(shards[1][0])
    # 4 files, 8 pipelines: every pipeline reads all files and keeps every 8th record.
    mine, by_record = data.shard_files(files, num_shards=8, index=3, seed=5)
    assert by_record and sorted(mine) == sorted(files)
    cfg = data.PipelineConfig(image_size=8, num_classes=4, training=False)
    per_shard = [
        np.concatenate([y.numpy() for _, y in data.build_dataset(files, cfg, 1, num_shards=8, shard_index=i)])
        for i in range(8)
    ]
    assert sum(len(s) for s in per_shard) == 128
    assert sorted(np.concatenate(per_shard).tolist()) == sorted(label for _, label in stored(files))


def _write(path: Path, records: list[bytes]) -> str:
    with tf.io.TFRecordWriter(str(path)) as w:
        for r in records:
            w.write(r)
    return str(path)


def _good(label=1) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), 128, np.uint8)).save(buf, format="JPEG")
    return datagen.encode_example(buf.getvalue(), label, height=8, width=8)


def test_non_matching_record_error_names_the_file(tmp_path):
    good = _write(tmp_path / "good-0", [_good()] * 4)
    bad = _write(tmp_path / "bad-1", [_good(), datagen.encode_example(b"GIF89a....", 1, height=8, width=8)])
    cfg = data.PipelineConfig(image_size=8, num_classes=4, training=False)
    with pytest.raises(tf.errors.InvalidArgumentError) as err:
        for _ in data.build_dataset([good, bad], cfg, 1):
            pass
    assert corrupt.is_bad_record(err.value)
    found = corrupt.find_corrupt_record([good, bad], cfg)
    assert found == f"{bad} record 1: image/encoded is neither JPEG nor PNG"


def test_crc_corruption_is_located_by_the_scan(tmp_path):
    good = _write(tmp_path / "good-0", [_good()] * 3)
    path = tmp_path / "bad-1"
    _write(path, [_good()] * 3)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # inside record 1
    path.write_bytes(bytes(raw))
    cfg = data.PipelineConfig(image_size=8, num_classes=4, training=False)
    with pytest.raises(tf.errors.DataLossError):
        for _ in data.build_dataset([good, str(path)], cfg, 1):
            pass
    found = corrupt.find_corrupt_record([good, str(path)], cfg)
    assert found.startswith(f"{path} record 1: corrupted record")
    # --skip-corrupt: the records before the bad one count, and that file ends there (the plan's
    # count of steps per epoch, without --steps-per-epoch or --train-examples).
    flags = ["--train-data=x", "--num-classes=4", "--batch-size=2", "--skip-corrupt"]
    skipping = parse_flags(
        flags + [f"--{d}-dir={tmp_path}/{d}" for d in ("model", "checkpoint", "tensorboard")]
    )
    assert data.count_records([good, str(path)], skip_corrupt=True) == 4
    assert count_steps(skipping, [good, str(path)], []) == (2, 0)


def test_skip_corrupt_counts_and_skips(tmp_path):
    records = [
        _good(0),
        _good(7),
        datagen.encode_example(b"", 1, height=8, width=8),
        _good(2),
        tf.train.Example().SerializeToString(),
    ]
    path = _write(tmp_path / "mixed-0", records)
    cfg = data.PipelineConfig(image_size=8, num_classes=4, training=False, skip_corrupt=True)
    skipped = tf.Variable(0, dtype=tf.int64)
    labels = [int(y[0]) for _, y in data.build_dataset([path], cfg, 1, skipped=skipped)]
    assert sorted(labels) == [0, 2]  # the map is not deterministic (cfg.deterministic): any order
    assert int(skipped.numpy()) == 3


def _png(label=1) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.full((8, 8, 3), 64, np.uint8)).save(buf, format="PNG")
    return datagen.encode_example(buf.getvalue(), label, height=8, width=8, image_format="PNG")


def test_one_decoder_for_data_of_one_format_and_a_named_stranger(tmp_path):
    jpegs = _write(tmp_path / "jpeg-0", [_good(0), _good(1), _good(2)])
    pngs = _write(tmp_path / "png-0", [_png(0), _png(1)])
    mixed = _write(tmp_path / "mixed-0", [_good(0), _good(1), _png(2)])  # the PNG after the sniffed records
    assert [data.sniff_format([f]) for f in (jpegs, pngs)] == ["jpeg", "png"]
    assert data.sniff_format([jpegs, pngs]) == "any"
    cfg = data.PipelineConfig(image_size=8, num_classes=4, training=False)
    assert sorted(int(y[0]) for _, y in data.build_dataset([pngs], cfg, 1)) == [0, 1]
    # Sniffed as JPEG: the PNG record fails, and the scan says why and what to pass.
    with pytest.raises(tf.errors.InvalidArgumentError) as err:
        for _ in data.build_dataset([mixed], cfg, 1):
            pass
    assert corrupt.is_bad_record(err.value)
    found = corrupt.find_corrupt_record([mixed], data.resolve_format([mixed], cfg))
    assert found.startswith(f"{mixed} record 2: image/encoded is PNG, but the data's first records are JPEG")
    assert "--image-format=any" in found
    anyfmt = data.PipelineConfig(image_size=8, num_classes=4, training=False, image_format="any")
    assert sorted(int(y[0]) for _, y in data.build_dataset([mixed], anyfmt, 1)) == [0, 1, 2]


def test_cached_decoded_pixels_give_the_same_batches_as_decoding(synth_data):
    files = data.list_files(f"{synth_data}/train-*")
    plain = data.PipelineConfig(image_size=20, num_classes=4, training=False, deterministic=True)
    cached = data.PipelineConfig(
        image_size=20, num_classes=4, training=False, deterministic=True, cache_decoded=True
    )
    ds = data.build_dataset(files, cached, 16)
    first = [(x.numpy(), y.numpy()) for x, y in ds]
    again = [(x.numpy(), y.numpy()) for x, y in ds]  # the second pass reads the cache
    decoded = [(x.numpy(), y.numpy()) for x, y in data.build_dataset(files, plain, 16)]
    assert len(first) == len(decoded) == 8
    for (xa, ya), (xb, yb), (xc, yc) in zip(first, again, decoded, strict=True):
        assert xa.dtype == np.uint8 and xa.shape == (16, 20, 20, 3)
        assert (ya == yb).all() and (ya == yc).all()
        assert np.array_equal(xa, xb) and np.abs(xa.astype(int) - xc.astype(int)).max() <= 1
    training = dataclasses.replace(cached, training=True, deterministic=False)
    labels = np.concatenate([y.numpy() for _, y in data.build_dataset(files, training, 16).take(12)])
    assert len(labels) == 192 and set(labels.tolist()) <= {0, 1, 2, 3}  # repeats past one epoch
