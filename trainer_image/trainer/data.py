"""The input pipeline: ImageNet-layout TFRecords -> batches of (uint8 image, int32 label).

Stages (each a small function, TF Model Garden's order):
  list files -> seeded shuffle of the list -> shard per input pipeline (by file when there are
  enough files, else by record) -> parallel interleave of TFRecordDataset (deterministic=False)
  -> record shuffle -> parse + decode + augment (parallel map) -> batch(drop_remainder) -> label
  check -> prefetch, with tf.data options (autotune, private threadpool, our own sharding).

Images leave the pipeline as uint8 (4x less host->device traffic than float32); the model
casts and rescales them on the accelerator. Paths may be local, `gs://` (TF's own GCS
filesystem) or `/gcs/` (Cloud Storage FUSE, an ordinary path to TF).
"""

from __future__ import annotations

import dataclasses
import os
import random

import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE
# Every function this module hands to tf.data (map, filter, interleave, reduce) branches on Python
# values only (the config) and uses tf.cond itself where a tensor decides: autograph, which tf.data
# otherwise applies to each of them, would rewrite their source (~1 s of CPU per trainer process,
# the same graph). `plain` marks them so (benchmarks/RESULTS-trainer-startup.md).
plain = tf.autograph.experimental.do_not_convert
JPEG_MAGIC = b"\xff\xd8\xff"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# Each open gs:// file keeps a read-ahead block of GCS_READ_CACHE_BLOCK_SIZE_MB (default 64);
# this many files are read at once, so host memory for read buffers is bounded by their product.
DEFAULT_READ_PARALLELISM = 16


class DataError(Exception):
    """Bad data configuration or corrupt data (the trainer exits 2 with this message)."""


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """Everything the pipeline needs, resolved once from the flags."""

    image_size: int
    num_classes: int
    training: bool
    label_offset: int = 0
    seed: int = 0
    skip_corrupt: bool = False
    cache: bool = False
    augment: str = "standard"  # standard (random resized crop + flip) | flip | none
    eval_crop_fraction: float = 0.875  # center crop of the shorter side, as for ImageNet eval
    shuffle_buffer: int = 10_000
    read_parallelism: int = DEFAULT_READ_PARALLELISM
    deterministic: bool = False  # True: reproducible order (slower), for tests/debugging
    threads: int = 0  # tf.data private threadpool size; 0 = number of cores
    image_format: str = "auto"  # jpeg | png | any (per record) | auto (sniff_format)
    cache_decoded: bool = False  # keep decoded pixels after the first epoch (small images)


def list_files(patterns: str) -> list[str]:
    """Expand a comma-separated list of paths/globs (local, gs://, /gcs/) into sorted files."""
    files: list[str] = []
    for pattern in [p.strip() for p in patterns.split(",") if p.strip()]:
        try:
            matched = tf.io.gfile.glob(pattern)
        except tf.errors.OpError as e:
            raise DataError(f"cannot list {pattern}: {e.message}") from None
        if not matched:
            raise DataError(f"no files match {pattern}")
        files.extend(sorted(m for m in matched if not tf.io.gfile.isdir(m)))
    if not files:
        raise DataError(f"no files match {patterns!r}")
    return files


def count_records(files: list[str], *, skip_corrupt: bool = False) -> int:
    """Number of records in `files` (reads them all: pass --steps-per-epoch to avoid it)."""

    @plain
    def read(filename):
        records = tf.data.TFRecordDataset(filename)
        return records.ignore_errors() if skip_corrupt else records

    ds = tf.data.Dataset.from_tensor_slices(files).interleave(
        read, cycle_length=min(len(files), 16), num_parallel_calls=AUTOTUNE, deterministic=False
    )
    return int(ds.reduce(tf.constant(0, tf.int64), plain(lambda n, _: n + 1)).numpy())


def sniff_format(files: list[str], *, sample_files: int = 4, records: int = 2) -> str:
    """ "jpeg" or "png" if the first `records` records of the first `sample_files` files are all
    that format, else "any" (decide per record, a quarter more CPU per image: tf.cond in a
    tf.data map runs a function per record)."""
    seen = set()
    for path in files[:sample_files]:
        try:
            for record in tf.data.TFRecordDataset(path).take(records):
                example = tf.train.Example.FromString(record.numpy())
                encoded = example.features.feature["image/encoded"].bytes_list.value
                head = encoded[0][:8] if encoded else b""
                seen.add(
                    "jpeg"
                    if head.startswith(JPEG_MAGIC)
                    else "png"
                    if head.startswith(PNG_MAGIC)
                    else "other"
                )
        except (tf.errors.OpError, ValueError):
            return "any"  # unreadable: the pipeline's own checks will say what is wrong
    return seen.pop() if len(seen) == 1 and seen <= {"jpeg", "png"} else "any"


def resolve_format(files: list[str], cfg: PipelineConfig) -> PipelineConfig:
    """`cfg` with image_format "auto" replaced by what sniff_format finds in `files`."""
    if cfg.image_format != "auto":
        return cfg
    return dataclasses.replace(cfg, image_format=sniff_format(files))


def shard_files(files: list[str], *, num_shards: int, index: int, seed: int) -> tuple[list[str], bool]:
    """The files input pipeline `index` of `num_shards` reads, and whether to shard by record.

    Every worker shuffles the list with the same seed, so the file shards are disjoint. With
    fewer files than pipelines, every pipeline reads all files and keeps every n-th record.
    """
    shuffled = list(files)
    random.Random(seed).shuffle(shuffled)
    if num_shards <= 1:
        return shuffled, False
    if len(shuffled) >= num_shards:
        return shuffled[index::num_shards], False
    return shuffled, True


def build_dataset(
    files: list[str],
    cfg: PipelineConfig,
    batch_size: int,
    *,
    num_shards: int = 1,
    shard_index: int = 0,
    skipped: tf.Variable | None = None,
) -> tf.data.Dataset:
    """The batched dataset of one input pipeline (`batch_size` is per pipeline/replica).

    Training datasets repeat forever (steps come from the caller); eval datasets are finite
    unless the caller repeats them. `skipped` counts records dropped by --skip-corrupt.
    """
    cfg = resolve_format(files, cfg)
    my_files, by_record = shard_files(files, num_shards=num_shards, index=shard_index, seed=cfg.seed)
    # Sharding by record needs the same record order on every worker: deterministic reads.
    deterministic = cfg.deterministic or by_record
    if cfg.cache_decoded:
        return _decoded_cache_dataset(
            my_files,
            cfg,
            batch_size,
            by_record=by_record,
            num_shards=num_shards,
            shard_index=shard_index,
            deterministic=deterministic,
            skipped=skipped,
        )
    ds = tf.data.Dataset.from_tensor_slices(my_files)
    if cfg.training and not cfg.cache:
        ds = ds.shuffle(len(my_files), seed=cfg.seed, reshuffle_each_iteration=True)
        ds = ds.repeat()
    ds = _interleave_records(ds, cfg, n_files=len(my_files), deterministic=deterministic, files_list=my_files)
    if by_record:
        ds = ds.shard(num_shards, shard_index)
    if cfg.cache:
        ds = ds.cache()
        if cfg.training:
            ds = ds.repeat()
    if cfg.training:
        ds = ds.shuffle(cfg.shuffle_buffer, seed=cfg.seed, reshuffle_each_iteration=True)
    # Parse and decode in one map (tf.data fuses nothing across a second map's boundary for free:
    # an identity map after it cost a function call per record).
    ds = ds.map(
        plain(lambda r: _parse_and_decode(r, cfg, skipped)),
        num_parallel_calls=AUTOTUNE,
        deterministic=deterministic,
    )
    if cfg.skip_corrupt:
        ds = ds.filter(plain(lambda image, label, ok: ok))
        # Images whose bytes look right but do not decode fail inside the map: skip them too.
        ds = ds.ignore_errors(log_warning=True)
        ds = ds.map(plain(lambda image, label, ok: (image, label)))
    ds = ds.batch(batch_size, drop_remainder=True)
    if not cfg.skip_corrupt:
        ds = ds.map(plain(lambda images, labels: (images, check_labels(labels, cfg))))
    ds = ds.prefetch(AUTOTUNE)
    return ds.with_options(_options(cfg, deterministic))


def _decoded_cache_dataset(
    files,
    cfg: PipelineConfig,
    batch_size: int,
    *,
    by_record: bool,
    num_shards: int,
    shard_index: int,
    deterministic: bool,
    skipped,
) -> tf.data.Dataset:
    """build_dataset with --cache-decoded: records are read, checked and decoded whole once; the
    uint8 pixels are cached and every epoch after the first only crops, resizes and flips them.
    Measured 2x less CPU per example than decoding every epoch (benchmarks/RESULTS-pipeline.md);
    memory is height x width x 3 bytes per stored image."""
    ds = _interleave_records(
        tf.data.Dataset.from_tensor_slices(files),
        cfg,
        n_files=len(files),
        deterministic=deterministic,
        files_list=files,
    )
    if by_record:
        ds = ds.shard(num_shards, shard_index)

    @plain
    def decode(record):
        encoded, label, ok = check_record(record, cfg)
        if cfg.skip_corrupt:
            deps = (
                [skipped.assign_add(tf.cast(tf.logical_not(ok), skipped.dtype))]
                if skipped is not None
                else []
            )
            with tf.control_dependencies(deps):
                image = tf.cond(
                    ok, lambda: _decode_whole(encoded, cfg), lambda: tf.zeros([1, 1, 3], tf.uint8)
                )
            return image, label, ok
        with tf.control_dependencies([tf.debugging.Assert(ok, [BAD_RECORD])]):
            return _decode_whole(encoded, cfg), label

    ds = ds.map(decode, num_parallel_calls=AUTOTUNE, deterministic=deterministic)
    if cfg.skip_corrupt:
        ds = ds.filter(plain(lambda image, label, ok: ok)).ignore_errors(log_warning=True)
        ds = ds.map(plain(lambda image, label, ok: (image, label)))
    ds = ds.cache()
    if cfg.training:
        ds = ds.repeat().shuffle(cfg.shuffle_buffer, seed=cfg.seed, reshuffle_each_iteration=True)

    @plain
    def crop(image, label):
        window = _crop_window(tf.shape(image), cfg)
        image = tf.image.crop_to_bounding_box(image, window[0], window[1], window[2], window[3])
        return _resize_and_flip(image, cfg), label

    ds = ds.map(crop, num_parallel_calls=AUTOTUNE, deterministic=deterministic)
    ds = ds.batch(batch_size, drop_remainder=True).prefetch(AUTOTUNE)
    return ds.with_options(_options(cfg, deterministic))


def _decode_whole(encoded, cfg: PipelineConfig):
    fmt = _format(cfg)
    if fmt == "jpeg":
        return tf.io.decode_jpeg(encoded, channels=3)
    if fmt == "png":
        return tf.io.decode_png(encoded, channels=3)
    image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
    image.set_shape([None, None, 3])
    return image


def synthetic_dataset(cfg: PipelineConfig, batch_size: int, *, shard_index: int = 0) -> tf.data.Dataset:
    """One random batch of the pipeline's shape and dtypes (uint8 images, int32 labels), made
    once, cached and repeated forever: no files, no decode.

    The strategy distributes it as a real batch (to each replica's device); the trainer then
    takes that batch once and every step reads it as a captured tensor (trainer/synthetic.py:
    no get_next in the step, whose hand-off to a tf.data thread counted as input wait on a busy
    machine), so a run on it measures everything but reading and decoding: the compute ceiling.
    TPUs read this dataset itself.
    """
    seed = cfg.seed * 1009 + shard_index  # different pipelines, different (fixed) noise

    @plain
    def make(_):
        images = tf.random.stateless_uniform(
            [batch_size, cfg.image_size, cfg.image_size, 3], seed=[seed, 1], maxval=256, dtype=tf.int32
        )
        labels = tf.random.stateless_uniform(
            [batch_size], seed=[seed, 2], maxval=cfg.num_classes, dtype=tf.int32
        )
        return tf.cast(images, tf.uint8), labels

    ds = tf.data.Dataset.range(1).map(make).cache().repeat()
    options = tf.data.Options()
    # One element per pipeline: auto-sharding would leave other workers with none.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    # No prefetch thread where the steps read it (TPUs): get_next takes the cached batch.
    options.autotune.enabled = False
    options.experimental_optimization.inject_prefetch = False
    return ds.with_options(options)


def build_sequential_dataset(files: list[str], cfg: PipelineConfig, batch_size: int) -> tf.data.Dataset:
    """The same records and transforms without parallelism, prefetch or tf.data's default
    optimisations (a lower bound: not what a user gets, see build_plain_dataset)."""
    ds = tf.data.TFRecordDataset(files)
    if cfg.training:
        ds = ds.repeat().shuffle(cfg.shuffle_buffer, seed=cfg.seed)
    ds = ds.map(plain(lambda r: _parse_and_decode(r, cfg, None))).batch(batch_size, drop_remainder=True)
    options = tf.data.Options()
    options.autotune.enabled = False
    options.experimental_optimization.apply_default_optimizations = False
    options.threading.private_threadpool_size = 1
    return ds.with_options(options)


def build_plain_dataset(
    files: list[str], cfg: PipelineConfig, batch_size: int, *, parallel: bool = True
) -> tf.data.Dataset:
    """What a user writes without this module (a benchmark baseline): TFRecordDataset -> shuffle
    -> map(decode) -> batch -> prefetch, with tf.data's defaults on, no checks. `parallel=False`:
    no parallel reads or map and no explicit prefetch (tf.data still injects one)."""
    ds = tf.data.TFRecordDataset(files, num_parallel_reads=AUTOTUNE if parallel else None)
    if cfg.training:
        ds = ds.repeat().shuffle(cfg.shuffle_buffer, seed=cfg.seed)

    @plain
    def decode(record):
        parsed = tf.io.parse_single_example(record, _FEATURES)
        image = _decode_and_augment(parsed["image/encoded"], cfg, jpeg_only=True)
        return image, tf.cast(parsed["image/class/label"], tf.int32)

    ds = ds.map(decode, num_parallel_calls=AUTOTUNE if parallel else None, deterministic=not parallel)
    ds = ds.batch(batch_size, drop_remainder=True)
    return ds.prefetch(AUTOTUNE) if parallel else ds


def _interleave_records(
    files: tf.data.Dataset, cfg: PipelineConfig, *, n_files: int, deterministic: bool, files_list=()
) -> tf.data.Dataset:
    # Large reads pay off on Cloud Storage; on a local disk the default buffer (256 KB) is cheaper:
    # an 8 MB buffer is allocated per file opened, every epoch.
    remote = any(str(f).startswith(("gs://", "/gcs/")) for f in files_list)
    buffer_size = 8 * 1024 * 1024 if remote else None

    @plain
    def read(filename):
        records = tf.data.TFRecordDataset(filename, buffer_size=buffer_size)
        if cfg.skip_corrupt:
            # A CRC/truncation error ends that file's records; tf.data logs a warning.
            records = records.ignore_errors(log_warning=True)
        return records

    return files.interleave(
        read,
        cycle_length=max(1, min(n_files, cfg.read_parallelism)),
        block_length=1,
        num_parallel_calls=AUTOTUNE,
        deterministic=deterministic,
    )


_FEATURES = {
    "image/encoded": tf.io.FixedLenFeature([], tf.string, default_value=""),
    "image/class/label": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
}
# What a failed label check says inside the pipeline. The record's file and position, and the
# reason, are found afterwards by corrupt.find_corrupt_record (corrupt.data_errors): building reason strings
# for every record cost more CPU than the rest of the checks together.
BAD_RECORD = "corrupt or non-matching record"


def check_record(record: tf.Tensor, cfg: PipelineConfig) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """(encoded bytes, 0-based int32 label, ok) of one serialized Example (--skip-corrupt: the
    records that fail are counted and skipped).

    ok is false for a record without image bytes or label, with a label outside
    [0, num_classes) after label_offset, or with bytes that are neither JPEG nor PNG (or not
    the one format cfg.image_format names).
    """
    parsed = tf.io.parse_single_example(record, _FEATURES)
    encoded = parsed["image/encoded"]
    label = tf.cast(parsed["image/class/label"] - cfg.label_offset, tf.int32)
    magic = tf.strings.substr(encoded, 0, 3)  # "" when too short: then neither matches
    is_jpeg, is_png = tf.equal(magic, JPEG_MAGIC), tf.equal(magic, PNG_MAGIC[:3])
    known_format = {"jpeg": is_jpeg, "png": is_png}.get(cfg.image_format, tf.logical_or(is_jpeg, is_png))
    # A missing label parses as -1 (- offset): below zero like any label under the offset.
    ok = known_format & (label >= 0) & (label < cfg.num_classes)
    return encoded, label, ok


def parse_record(record: tf.Tensor, cfg: PipelineConfig) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """(encoded bytes, 0-based int32 label, ok, reason) of one serialized Example: the slow path
    (find_corrupt_record), which says what is wrong with a record."""
    parsed = tf.io.parse_single_example(record, _FEATURES)
    encoded = parsed["image/encoded"]
    raw_label = parsed["image/class/label"]
    label = tf.cast(raw_label - cfg.label_offset, tf.int32)
    has_image = tf.strings.length(encoded) > 0
    known_format = tf.logical_or(_is_jpeg(encoded), _is_png(encoded))
    has_label = raw_label >= 0
    in_range = tf.logical_and(label >= 0, label < cfg.num_classes)
    reason = tf.strings.join(
        [
            tf.where(has_image, "", "no image/encoded feature; "),
            tf.where(
                tf.logical_or(known_format, tf.logical_not(has_image)),
                "",
                "image/encoded is neither JPEG nor PNG; ",
            ),
            tf.where(has_label, "", "no image/class/label feature; "),
            tf.where(
                tf.logical_or(in_range, tf.logical_not(has_label)),
                "",
                tf.strings.format(
                    "label {} - label_offset "
                    + str(cfg.label_offset)
                    + " is outside [0, "
                    + str(cfg.num_classes)
                    + "); ",
                    raw_label,
                ),
            ),
        ]
    )
    expected = {"jpeg": _is_jpeg(encoded), "png": _is_png(encoded)}.get(_format(cfg), known_format)
    other = "PNG" if _format(cfg) == "jpeg" else "JPEG"
    reason = tf.strings.join(
        [
            reason,
            tf.where(
                tf.logical_or(expected, tf.logical_not(known_format)),
                "",
                f"image/encoded is {other}, but the data's first records are "
                f"{_format(cfg).upper()} (--image-format={cfg.image_format}): "
                "pass --image-format=any for data that mixes both; ",
            ),
        ]
    )
    ok = has_image & known_format & expected & has_label & in_range
    return encoded, label, ok, reason


def _format(cfg: PipelineConfig) -> str:
    return cfg.image_format if cfg.image_format in ("jpeg", "png") else "any"


def _parse_and_decode(record, cfg: PipelineConfig, skipped: tf.Variable | None):
    """(image, label) of one record; with skip_corrupt (image, label, ok), ok checked first.

    Without skip_corrupt nothing is checked per record that the decode does not check anyway: a
    record without image bytes, or with bytes of another format, fails its decoder, and the labels
    are checked once per batch (check_labels). Per-record checks (check_record: a magic-bytes
    compare, a range test and an Assert) cost 16% more CPU per example for what a failing decode
    already says (benchmarks/RESULTS-pipeline.md); either failure stops the run, and
    find_corrupt_record then names the record and why.
    """
    if cfg.skip_corrupt:
        encoded, label, ok = check_record(record, cfg)
        deps = [skipped.assign_add(tf.cast(tf.logical_not(ok), skipped.dtype))] if skipped is not None else []
        with tf.control_dependencies(deps):
            image = tf.cond(
                ok,
                lambda: _decode_and_augment(encoded, cfg),
                lambda: tf.zeros([cfg.image_size, cfg.image_size, 3], tf.uint8),
            )
        return image, label, ok
    parsed = tf.io.parse_single_example(record, _FEATURES)
    label = tf.cast(parsed["image/class/label"] - cfg.label_offset, tf.int32)
    return _decode_and_augment(parsed["image/encoded"], cfg), label


def check_labels(labels: tf.Tensor, cfg: PipelineConfig) -> tf.Tensor:
    """`labels` (a batch, 0-based), once every one is in [0, num_classes): a missing label parses
    as -1, below zero like any under the label offset. One Assert per batch, not per record."""
    ok = tf.reduce_all((labels >= 0) & (labels < cfg.num_classes))
    with tf.control_dependencies([tf.debugging.Assert(ok, [BAD_RECORD])]):
        return tf.identity(labels)


def _is_jpeg(encoded):
    return tf.equal(tf.strings.substr(encoded, 0, len(JPEG_MAGIC)), JPEG_MAGIC)


def _is_png(encoded):
    return tf.equal(tf.strings.substr(encoded, 0, len(PNG_MAGIC)), PNG_MAGIC)


def _decode_and_augment(encoded, cfg: PipelineConfig, *, jpeg_only: bool = False):
    """Decode (only the crop, for JPEG), resize to image_size, uint8, flip.

    JPEG reads its shape from the header and decodes just the crop window (cheaper than a
    whole decode, measured: benchmarks/RESULTS-pipeline.md); PNG (no partial decode) decodes
    whole and crops. One decoder when the data has one format (cfg.image_format, sniffed);
    image_format "any" branches per record (tf.cond: a function call per record).
    """
    fmt = "jpeg" if jpeg_only else _format(cfg)
    if fmt == "jpeg":
        image = _crop_jpeg(encoded, cfg)
    elif fmt == "png":
        image = _crop_png(encoded, cfg)
    else:
        image = tf.cond(_is_jpeg(encoded), lambda: _crop_jpeg(encoded, cfg), lambda: _crop_png(encoded, cfg))
    return _resize_and_flip(image, cfg)


def _resize_and_flip(image, cfg: PipelineConfig):
    image = tf.image.resize(image, [cfg.image_size, cfg.image_size], method="bilinear")
    # Bilinear weights are convex, so the values stay within [0, 255]: adding 0.5 and truncating
    # rounds them (half up) without tf.round and a clip, two ops fewer per image.
    image = tf.cast(image + 0.5, tf.uint8)
    if cfg.training and cfg.augment in ("standard", "flip"):
        image = tf.image.random_flip_left_right(image, seed=cfg.seed)
    image.set_shape([cfg.image_size, cfg.image_size, 3])
    return image


def _crop_window(shape, cfg: PipelineConfig):
    """[y, x, h, w]: an Inception-style random resized crop (8-100% of the area, aspect 3/4-4/3)
    when training with standard augmentation, else the central crop of the shorter side."""
    if cfg.training and cfg.augment == "standard":
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            shape,
            bounding_boxes=tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4]),
            min_object_covered=0.1,
            aspect_ratio_range=(3 / 4, 4 / 3),
            area_range=(0.08, 1.0),
            max_attempts=10,
            use_image_if_no_bounding_boxes=True,
            seed=cfg.seed,
        )
        return tf.stack([begin[0], begin[1], size[0], size[1]])
    fraction = cfg.eval_crop_fraction if not cfg.training else 1.0
    h, w = shape[0], shape[1]
    side = tf.maximum(tf.cast(tf.cast(tf.minimum(h, w), tf.float32) * fraction, tf.int32), 1)
    return tf.stack([(h - side + 1) // 2, (w - side + 1) // 2, side, side])


def _crop_jpeg(encoded, cfg: PipelineConfig):
    window = _crop_window(tf.image.extract_jpeg_shape(encoded), cfg)
    return tf.image.decode_and_crop_jpeg(encoded, window, channels=3)


def _crop_png(encoded, cfg: PipelineConfig):
    full = tf.io.decode_png(encoded, channels=3)
    window = _crop_window(tf.shape(full), cfg)
    return tf.image.crop_to_bounding_box(full, window[0], window[1], window[2], window[3])


def _options(cfg: PipelineConfig, deterministic: bool) -> tf.data.Options:
    options = tf.data.Options()
    options.deterministic = deterministic
    options.autotune.enabled = True
    options.experimental_optimization.map_parallelization = True
    options.experimental_optimization.parallel_batch = True
    # A pool of its own: on the model's shared pool the decode ops queue behind the model's and
    # tf.data spends ~15% more CPU per example (benchmarks/RESULTS-pipeline.md, threads-4).
    options.threading.private_threadpool_size = cfg.threads or default_threads()
    options.threading.max_intra_op_parallelism = 1
    # We shard ourselves (by file or record) in build_dataset.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return options


def default_threads() -> int:
    """The input pipeline's private threadpool when --data-threads is 0: one thread per vCPU this
    process may use, at least 4. On 2 vCPUs the pipeline alone ran 1.9x faster at 21% less CPU
    per example than on the shared pool; training was 1.6-3.9% faster in 4 of 4 pairs beside
    other work, and level on a quiet machine (within its +-5% noise): benchmarks/RESULTS-pipeline.md."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(4, cpus)
