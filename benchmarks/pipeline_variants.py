"""The input pipeline alone (no model) on this machine: examples/s and CPU-ms per 100 examples of
trainer.data against what a user would write, and the variants issue 26 asked to measure
(tf.data autotune, private threadpool size, map fusion / parallelisation, the decode order,
JPEG/PNG handling, caching decoded small images). Variants run round-robin, `--repeats` times
each; the table shows medians. /proc/loadavg is recorded.

    .venv/bin/python benchmarks/pipeline_variants.py --repeats 3 --out benchmarks/RESULTS-pipeline.md
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_compare import loadavg
from trainer_throughput import machine


def variants(files, image_size: int, batch: int) -> dict:
    """name -> (description, function returning the dataset)."""
    import tensorflow as tf

    from trainer import data

    cfg = data.PipelineConfig(image_size=image_size, num_classes=10, training=True, seed=0)

    def with_options(ds, **settings):
        options = tf.data.Options()
        for path, value in settings.items():
            target = options
            *parents, leaf = path.split("__")
            for p in parents:
                target = getattr(target, p)
            setattr(target, leaf, value)
        return ds.with_options(options)

    def lean(cfg_, *, jpeg_only=False, decode_full=False, cache_decoded=False):
        """trainer.data.build_dataset's stages, with one stage swapped (one input pipeline)."""
        ds = tf.data.Dataset.from_tensor_slices(files).shuffle(len(files), seed=0).repeat()
        ds = data._interleave_records(ds, cfg_, n_files=len(files), deterministic=False)
        if cache_decoded:  # decode whole once, keep uint8 pixels, crop + resize per epoch

            def decode(record):
                encoded, label, _ok = data.check_record(record, cfg_)
                return tf.io.decode_jpeg(encoded, channels=3), label

            ds = tf.data.TFRecordDataset(files).map(decode, num_parallel_calls=tf.data.AUTOTUNE)
            ds = ds.cache().repeat().shuffle(cfg_.shuffle_buffer, seed=0)

            def crop(image, label):
                window = data._crop_window(tf.shape(image), cfg_)
                image = tf.image.crop_to_bounding_box(image, window[0], window[1], window[2], window[3])
                image = tf.image.resize(image, [image_size, image_size])
                image = tf.cast(tf.clip_by_value(tf.round(image), 0.0, 255.0), tf.uint8)
                return tf.image.random_flip_left_right(image, seed=0), label

            ds = ds.map(crop, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
        else:
            ds = ds.shuffle(cfg_.shuffle_buffer, seed=0)

            def parse(record):
                encoded, label, ok = data.check_record(record, cfg_)
                with tf.control_dependencies([tf.debugging.Assert(ok, [data.BAD_RECORD])]):
                    if decode_full:  # decode the whole JPEG, then crop (vs decode_and_crop_jpeg)
                        full = tf.io.decode_jpeg(encoded, channels=3)
                        window = data._crop_window(tf.shape(full), cfg_)
                        image = tf.image.crop_to_bounding_box(
                            full, window[0], window[1], window[2], window[3]
                        )
                        image = tf.image.resize(image, [image_size, image_size])
                        image = tf.image.random_flip_left_right(
                            tf.cast(tf.clip_by_value(tf.round(image), 0.0, 255.0), tf.uint8), seed=0
                        )
                    else:
                        image = data._decode_and_augment(encoded, cfg_, jpeg_only=jpeg_only)
                return image, label

            ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
        ds = ds.batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
        return ds.with_options(data._options(cfg_, False))

    def threads(n):
        return dataclasses.replace(cfg, threads=n)

    return {
        "trainer": ("trainer.data.build_dataset as shipped", lambda: data.build_dataset(files, cfg, batch)),
        "plain": (
            "what a user writes: parallel reads + map, prefetch, tf.data defaults, no checks",
            lambda: data.build_plain_dataset(files, cfg, batch),
        ),
        "naive": (
            "a first script: no parallel reads or map, no prefetch (tf.data defaults on)",
            lambda: data.build_plain_dataset(files, cfg, batch, parallel=False),
        ),
        "sequential": (
            "tf.data default optimisations off, 1 thread (the old baseline)",
            lambda: data.build_sequential_dataset(files, cfg, batch),
        ),
        "format-any": (
            "trainer with --image-format=any: a JPEG/PNG tf.cond per record",
            lambda: data.build_dataset(files, dataclasses.replace(cfg, image_format="any"), batch),
        ),
        "per-record-checks": (
            "trainer with the per-record checks it had before (format magic, label range, "
            "an Assert per record)",
            lambda: lean(cfg, jpeg_only=True),
        ),
        "decode-full": ("trainer, decode the whole JPEG then crop", lambda: lean(cfg, decode_full=True)),
        "cache-decoded": (
            "trainer, decoded pixels cached, crop + resize per epoch",
            lambda: lean(cfg, cache_decoded=True),
        ),
        "threads-1": (
            "trainer, private threadpool of 1",
            lambda: data.build_dataset(files, threads(1), batch),
        ),
        "threads-4": (
            "trainer, private threadpool of 4",
            lambda: data.build_dataset(files, threads(4), batch),
        ),
        "no-autotune": (
            "trainer, autotune off",
            lambda: with_options(data.build_dataset(files, cfg, batch), autotune__enabled=False),
        ),
        "no-map-fusion-opts": (
            "trainer, map_parallelization and parallel_batch off",
            lambda: with_options(
                data.build_dataset(files, cfg, batch),
                experimental_optimization__map_parallelization=False,
                experimental_optimization__parallel_batch=False,
            ),
        ),
        "intra-op-default": (
            "trainer, max_intra_op_parallelism left at its default",
            lambda: with_options(
                data.build_dataset(files, cfg, batch), threading__max_intra_op_parallelism=0
            ),
        ),
    }


def measure(make, batches: int) -> tuple[float, float]:
    """(examples/s, process CPU-ms per 100 examples) after 5 warm-up batches."""
    it = iter(make())
    for _ in range(5):
        next(it)
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(batches):
        next(it)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    examples = batches * BATCH
    return examples / seconds, 1000 * cpu / examples * 100


BATCH = 128


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batches", type=int, default=40)
    p.add_argument("--jpeg-size", type=int, default=80)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--only", help="comma-separated variant names")
    p.add_argument("--out")
    args = p.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from trainer import datagen

    start_load = loadavg()
    with tempfile.TemporaryDirectory(prefix="pipe-") as tmp:
        files = datagen.synthesize(
            tmp, examples=4096, shards=16, image_size=args.jpeg_size, num_classes=10, seed=3
        )
        table = variants(files, args.image_size, BATCH)
        names = [n for n in table if not args.only or n in args.only.split(",")]
        runs: dict[str, list] = {n: [] for n in names}
        loads = []
        for r in range(args.repeats):
            loads.append(loadavg())
            for name in names:
                rate, cpu = measure(table[name][1], args.batches)
                runs[name].append((rate, cpu))
                print(f"#{r} {name}: {rate:,.0f} examples/s, {cpu:.1f} CPU-ms/100", flush=True)
    med = statistics.median
    plain = med(x[0] for x in runs["plain"]) if "plain" in runs else None
    lines = [
        "# The input pipeline alone (no model)",
        "",
        f"Machine: {machine()}. /proc/loadavg at start {start_load}, per round {'; '.join(loads)}, at end "
        f"{loadavg()}.",
        f"{args.jpeg_size} px JPEGs (4,096 in 16 shards) -> random resized crop {args.image_size} px + flip, "
        f"batch {BATCH}; {args.batches} batches after 5 warm-up, median of {args.repeats} round-robin runs. "
        "CPU-ms/100 = process CPU time (all threads) per 100 examples: what decoding takes from a model "
        "sharing the cores.",
        f"Command: `.venv/bin/python benchmarks/pipeline_variants.py --repeats {args.repeats}"
        f"{' --only ' + args.only if args.only else ''}{' --out ' + args.out if args.out else ''}`",
        "",
        "| variant | examples/s | vs plain | CPU-ms / 100 examples | what |",
        "|---|---:|---:|---:|---|",
    ]
    for name in names:
        rate, cpu = med(x[0] for x in runs[name]), med(x[1] for x in runs[name])
        vs = f"{rate / plain:.2f}" if plain else "-"
        lines.append(f"| {name} | {rate:,.0f} | {vs} | {cpu:.1f} | {table[name][0]} |")
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
