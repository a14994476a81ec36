"""Write image-classification TFRecords in the ImageNet layout the input pipeline reads.

`synthesize`: random images (valid JPEG) with random labels, for demos and throughput tests.
The CLI's `vertex-trainer data synth` runs it without TensorFlow: it passes the host's own
Example encoder and TFRecord writer (vertex_trainer.dataprep.synth: local paths and gs:// through
google-cloud-storage). Called without them (the tests and benchmarks in a TensorFlow process),
it encodes with `tf.train.Example` and writes with `tf.io.TFRecordWriter` (gs:// through
TensorFlow's own client). One generator either way: same seed, same pixels and labels. The
container's `trainer` never imports vertex_trainer, nor vertex_trainer.dataprep the trainer, so the
generator lives here and its callers choose the writer. Converting real class-per-folder images is
`vertex-trainer data convert`, an Apache Beam pipeline on the host (vertex_trainer.dataprep),
which writes the same layout without TensorFlow.

Records are `tf.train.Example`s with the feature names of the public ImageNet converters
(`image/encoded`, `image/class/label`, `image/format`, `image/height`, ...). Labels are written
0-based. TensorFlow is imported inside the functions so importing this module stays cheap.
"""

from __future__ import annotations

import io
import math
import os
import posixpath
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol


class Encode(Protocol):
    """`encode_example`'s signature: one JPEG and its label -> a serialized Example."""

    def __call__(self, image: bytes, label: int, /, *, height: int, width: int, filename: str) -> bytes: ...


# write(path, records): one shard file of serialized Examples, in TFRecord framing.
WriteShard = Callable[[str, Iterable[bytes]], None]


def shard_name(out_dir: str, prefix: str, index: int, shards: int) -> str:
    """`<out_dir>/<prefix>-00003-of-00016`, the ImageNet converters' naming."""
    return _join(out_dir, f"{prefix}-{index:05d}-of-{shards:05d}")


def encode_example(
    image_bytes: bytes,
    label: int,
    *,
    height: int,
    width: int,
    image_format: str = "JPEG",
    filename: str = "",
    synset: str = "",
    channels: int = 3,
) -> bytes:
    """One serialized `tf.train.Example` in the ImageNet TFRecord layout."""
    import tensorflow as tf

    def _bytes(v: bytes) -> tf.train.Feature:
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))

    def _int(v: int) -> tf.train.Feature:
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v)]))

    feature = {
        "image/encoded": _bytes(image_bytes),
        "image/format": _bytes(image_format.encode()),
        "image/class/label": _int(label),
        "image/class/synset": _bytes(synset.encode()),
        "image/height": _int(height),
        "image/width": _int(width),
        "image/channels": _int(channels),
        "image/colorspace": _bytes(b"RGB"),
        "image/filename": _bytes(filename.encode()),
    }
    example: bytes = tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
    return example


def write_shard(path: str, records: Iterable[bytes]) -> None:
    """One TFRecord file with tf.io.TFRecordWriter (local or gs://, TensorFlow's client)."""
    import tensorflow as tf

    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)


def _write_split(
    items: Sequence[Any], paths: Sequence[str], encode: Callable[[Any], bytes], write: WriteShard
) -> list[str]:
    # Contiguous near-equal runs: shard i holds items [i*n/S, (i+1)*n/S).
    n, s = len(items), len(paths)
    for i, path in enumerate(paths):
        lo, hi = (i * n) // s, ((i + 1) * n) // s
        write(path, (encode(item) for item in items[lo:hi]))
    return list(paths)


def synthesize(
    out_dir: str,
    *,
    examples: int,
    shards: int,
    image_size: int,
    num_classes: int,
    seed: int = 0,
    prefix: str = "train",
    eval_examples: int = 0,
    eval_prefix: str = "validation",
    encode: Encode = encode_example,
    write: WriteShard = write_shard,
) -> list[str]:
    """Write `examples` random JPEG images with random labels into `shards` TFRecord files.

    Each class gets its own mean colour plus noise, so a model can learn something from the
    data (useful for demos) while the bytes stay valid, varied JPEG. With `eval_examples > 0`
    an eval split of that size is written too (`<eval_prefix>-*`, one shard per 8 train
    shards, at least one), drawn from the same distribution. Returns the train shard paths,
    followed by the eval shard paths when written. `encode` makes one record (default: with
    tf.train.Example) and `write` one shard file (default: tf.io.TFRecordWriter); the host's
    `data synth` passes TensorFlow-free ones.
    """
    import numpy as np

    _check_positive(examples=examples, shards=shards, image_size=image_size, num_classes=num_classes)
    if shards > examples:
        raise ValueError(
            f"shards={shards} is more than examples={examples}: every shard needs at least one record"
        )
    _makedirs(out_dir)
    rng = np.random.default_rng(seed)
    palette = rng.integers(30, 226, size=(num_classes, 3))

    def make(split_examples: int, split_prefix: str, split_shards: int) -> list[str]:
        labels = rng.integers(0, num_classes, size=split_examples)
        seeds = rng.integers(0, 2**31 - 1, size=split_examples)

        def one(i: int) -> bytes:
            r = np.random.default_rng(int(seeds[i]))
            label = int(labels[i])
            noise = r.normal(0.0, 40.0, size=(image_size, image_size, 3))
            pixels = np.clip(palette[label] + noise, 0, 255).astype(np.uint8)
            return encode(
                _to_jpeg(pixels),
                label,
                height=image_size,
                width=image_size,
                filename=f"synthetic-{split_prefix}-{i}.jpg",
            )

        paths = [shard_name(out_dir, split_prefix, i, split_shards) for i in range(split_shards)]
        return _write_split(range(split_examples), paths, one, write)

    written = make(examples, prefix, shards)
    if eval_examples > 0:
        eval_shards = max(1, min(eval_examples, math.ceil(shards / 8)))
        written += make(eval_examples, eval_prefix, eval_shards)
    return written


def _to_jpeg(pixels: Any, quality: int = 90) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _join(base: str, *parts: str) -> str:
    # posixpath for gs:// and local POSIX paths alike (os.path would be the same on Linux).
    return posixpath.join(base, *parts)


def _makedirs(path: str) -> None:
    if path.startswith("gs://"):
        return  # object stores have no directories
    os.makedirs(path, exist_ok=True)


def iter_records(paths: Sequence[str]) -> Iterator[bytes]:
    """Yield the serialized records of `paths` in order (a small helper for tools and tests)."""
    import tensorflow as tf

    for record in tf.data.TFRecordDataset(list(paths)):
        yield record.numpy()
