"""The conversion as an Apache Beam pipeline: the same graph on the DirectRunner and on Dataflow.

    class folders --List--> files (path, label, split, size, 64-bit shuffle key)
        --totals per split--> shard count per split (side input; only file metadata so far)
        --Assign--> ((split, shard, of), file) --GroupByKey--> one group per output shard
        --Write--> read, check and encode each image, write the shard; bad files -> rejected
    all shards and rejections (side inputs) --Finalize--> labels.txt, rejected.txt,
        manifest.json and, last, the marker (default `_SUCCESS`)

Only file *metadata* is shuffled: the shard writer reads its own images (a few at a time, in
order), so terabytes of image bytes are read once and written once, never shuffled, and a
worker holds a few images in memory, not a shard.

Reproducible: an image's shuffle key is a hash of (seed, split, its path relative to the
tree), its shard is the key's range `key * shards >> 64`, and a shard holds its images sorted by
key. Nothing depends on worker count, bundle order or run time, so a fixed seed gives
byte-identical shards on any runner (same Pillow when images are re-encoded).

This module runs on Dataflow workers: it imports only the standard library, apache_beam,
Pillow, google-crc32c and its sibling worker modules (`staging.WORKER_MODULES`), never the rest
of vertex_trainer.
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import os
import posixpath
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from vertex_trainer.dataprep import images, records

TRAIN, EVAL = "train", "validation"  # the splits, and their shard name prefixes
REJECTED = "rejected"  # the tagged output of rejected files
# An image file's bytes, at most: a dataset is whoever filled the folder or bucket, and each file
# is read whole into a worker's memory (a link to /dev/zero named cat.jpg took 14 GB in 25 s).
MAX_IMAGE_BYTES = 256 << 20
NAMESPACE = "vertex-trainer"  # Beam counter namespace (Dataflow console: job metrics)
LABELS_FILE, REJECTED_FILE, MANIFEST_FILE = "labels.txt", "rejected.txt", "manifest.json"
FORMAT = "vertex-trainer/tfrecords/v1"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plan:
    """Everything the pipeline needs, resolved by the launcher (classes already listed)."""

    image_dir: str
    out_dir: str
    labels: tuple[str, ...]  # class folder names, sorted: label = index
    eval_dir: str | None = None
    eval_classes: tuple[str, ...] = ()  # class folders found in eval_dir (a subset of labels)
    eval_fraction: float = 0.0
    shards: int | None = None  # train shards; None: by size
    eval_shards: int | None = None
    target_shard_bytes: int = 128 * 2**20
    seed: int = 0
    max_side: int | None = None
    jpeg_quality: int = 90
    marker: str = "_SUCCESS"
    read_threads: int = 8  # concurrent image reads per shard writer
    created: str = ""
    tool: str = ""
    runner: str = ""

    def folders(self) -> list[tuple[str, str, int, str | None]]:
        """(tree, class, label, split or None = by --eval-fraction) for each class folder."""
        split = None if self.eval_fraction else TRAIN
        tasks = [(self.image_dir, name, label, split) for label, name in enumerate(self.labels)]
        if self.eval_dir:
            tasks += [(self.eval_dir, name, self.labels.index(name), EVAL) for name in self.eval_classes]
        return tasks

    def splits(self) -> tuple[str, ...]:
        return (TRAIN, EVAL) if (self.eval_dir or self.eval_fraction) else (TRAIN,)


class Source(NamedTuple):
    """One listed file."""

    path: str
    rel: str  # "<class>/<name>", relative to its tree: the same key wherever the tree lives
    label: int
    split: str
    size: int
    key: int  # 64-bit shuffle key


def hash64(*parts: object) -> int:
    """A stable 64-bit hash (Python's hash() differs per process)."""
    text = "\0".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def split_of(plan: Plan, rel: str) -> str:
    """--eval-fraction: a fixed, seeded share of each class goes to validation."""
    return EVAL if hash64(plan.seed, "split", rel) < plan.eval_fraction * 2**64 else TRAIN


def open_for_write(path: str) -> Any:  # a Beam file handle
    """Every file the pipeline writes goes through here (one place to log, and for tests)."""
    log.info("writing %s", path)
    return FileSystems.create(
        path, mime_type="application/octet-stream", compression_type=CompressionTypes.UNCOMPRESSED
    )


def _count(name: str, n: int = 1) -> None:
    Metrics.counter(NAMESPACE, name).inc(n)


class ListFolder(beam.DoFn):
    """The files directly inside one class folder (local or gs://), listed on a worker. Hidden
    files (.DS_Store, macOS's ._* copies) are skipped, as hidden folders are by the launcher."""

    def __init__(self, plan: Plan):
        self.plan = plan

    def process(self, task: Any) -> Iterator[Source]:
        tree, name, label, split = task
        folder = records.join(tree, name)
        # `/**`, then only the folder's own files: Beam's `*` never matches a backslash, so a
        # file named `a\b.jpg` was neither stored nor rejected (both list the whole subtree).
        for meta in FileSystems.match([folder + "/**"])[0].metadata_list:
            base = posixpath.basename(meta.path)
            if posixpath.dirname(meta.path) != folder:  # a file in a folder below it
                continue
            if not base or base.startswith("."):  # a console-made "folder/" object; hidden files
                continue
            rel = f"{name}/{base}"
            s = split or split_of(self.plan, rel)
            _count("files_listed")
            yield Source(meta.path, rel, label, s, meta.size_in_bytes, hash64(self.plan.seed, s, rel))


def split_and_size(src: Source) -> tuple[str, tuple[int, int]]:
    return src.split, (1, src.size)


def sum_pairs(pairs: Iterable[tuple[int, int]]) -> tuple[int, int]:
    files = size = 0
    for n, b in pairs:
        files, size = files + n, size + b
    return files, size


def shard_count(total: tuple[str, tuple[int, int]], plan: Plan) -> tuple[str, int]:
    """(split, shards): as asked, else ~target_shard_bytes of input each; never more than files."""
    split, (files, size) = total
    asked = plan.shards if split == TRAIN else plan.eval_shards
    want = asked or -(-size // plan.target_shard_bytes)
    return split, max(1, min(want, files))


def assign(src: Source, counts: dict[str, Any]) -> tuple[tuple[str, int, int], Source]:
    of = counts[src.split]
    return (src.split, (src.key * of) >> 64, of), src


def slots(count: tuple[str, int]) -> Iterator[Any]:  # Any: Beam reads the hints
    """One empty entry per shard, so every shard file exists even if no image landed in it."""
    split, of = count
    for i in range(of):
        yield (split, i, of), None


def _ordered(
    pool: ThreadPoolExecutor, fn: Callable[[Any], Any], items: list[Any], window: int
) -> Iterator[tuple[Any, Any]]:
    """fn(item) for each item, `window` at a time in the pool, yielded in order."""
    pending: collections.deque[Any] = collections.deque()
    for item in items:
        pending.append((item, pool.submit(fn, item)))
        if len(pending) >= window:
            first, future = pending.popleft()
            yield first, future.result()
    while pending:
        first, future = pending.popleft()
        yield first, future.result()


class _NotAFile(Exception):
    """A local path to read that is not a regular file."""


class WriteShard(beam.DoFn):
    """Read, check and encode the images of one shard, in key order, into its TFRecord file."""

    def __init__(self, plan: Plan):
        self.plan = plan

    def setup(self) -> None:
        self._pool = ThreadPoolExecutor(max(1, self.plan.read_threads))
        self._local = threading.local()

    def teardown(self) -> None:
        self._pool.shutdown(wait=False)

    def _read(self, path: str) -> bytes:
        """The file's first MAX_IMAGE_BYTES + 1 bytes (one more tells a larger file); _NotAFile
        for a local path that is not a regular file (a FIFO would wait, a device never end)."""
        if path.startswith("gs://"):
            # One client per thread: FileSystems.open makes a new client (and connection) per file.
            gcs = getattr(self._local, "gcs", None)
            if gcs is None:
                from apache_beam.io.gcp.gcsio import GcsIO
                from apache_beam.options.pipeline_options import PipelineOptions

                # Explicit empty options: PipelineOptions() alone would parse this process's argv.
                gcs = self._local.gcs = GcsIO(pipeline_options=PipelineOptions([]))
            with gcs.open(path, "rb") as f:
                data: bytes = f.read(MAX_IMAGE_BYTES + 1)
                return data
        if "://" not in path and not stat.S_ISREG(os.stat(path).st_mode):
            raise _NotAFile(path)
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            local: bytes = f.read(MAX_IMAGE_BYTES + 1)
            return local

    def _load(self, src: Source) -> tuple[int, images.Checked | images.Rejection]:
        """(bytes read, result), in a pool thread (so no Beam counters here: they are per thread)."""
        too_large = images.Rejection("too-large", f"over the {MAX_IMAGE_BYTES >> 20} MiB an image may be")
        if src.size > MAX_IMAGE_BYTES:  # its listed size: not read at all
            return 0, too_large
        try:
            data = self._read(src.path)
        except FileNotFoundError:
            return 0, images.Rejection("unreadable", "gone since it was listed")
        except _NotAFile:
            return 0, images.Rejection("unreadable", "not a regular file (a FIFO, a device or a link to one)")
        except Exception as e:
            if type(e).__name__ == "NotFound":
                return 0, images.Rejection("unreadable", "gone since it was listed")
            raise
        if len(data) > MAX_IMAGE_BYTES:  # (larger than it was listed)
            return len(data), too_large
        return len(data), images.check_image(
            data, max_side=self.plan.max_side, quality=self.plan.jpeg_quality
        )

    def process(self, group: Any) -> Iterator[Any]:
        (split, index, of), entries = group
        sources = sorted((s for s in entries if s is not None), key=lambda s: (s.key, s.rel))
        name = records.shard_name(split, index, of)
        handle = open_for_write(records.join(self.plan.out_dir, name))
        per_class: collections.Counter[Any] = collections.Counter()
        examples = size = resized = reencoded = 0
        for src, (nbytes, result) in _ordered(
            self._pool, self._load, sources, 2 * max(1, self.plan.read_threads)
        ):
            _count("bytes_read", nbytes)
            if isinstance(result, images.Rejection):
                _count("rejected")
                _count(f"rejected_{result.kind}")
                yield beam.pvalue.TaggedOutput(REJECTED, (src.path, result.kind, result.reason, src.label))
                continue
            record = records.image_example(
                result.data,
                src.label,
                image_format=result.format,
                height=result.height,
                width=result.width,
                channels=result.channels,
                synset=self.plan.labels[src.label],
                filename=posixpath.basename(src.path),
            )
            size += records.write_record(handle, record)
            examples += 1
            per_class[src.label] += 1
            resized += result.resized
            reencoded += result.reencoded
        # A failure above may leave a partial file: Beam retries the shard, which rewrites the
        # same bytes, and until the marker exists nothing is meant to read it.
        handle.close()
        _count("images_written", examples)
        _count("bytes_written", size)
        _count("shards_written")
        yield {
            "split": split,
            "index": index,
            "file": name,
            "examples": examples,
            "bytes": size,
            "per_class": dict(per_class),
            "resized": resized,
            "reencoded": reencoded,
        }


class NoImages(RuntimeError):
    """Nothing could be converted: the run fails and writes no marker."""


class Finalize(beam.DoFn):
    """After every shard: labels.txt, rejected.txt, manifest.json, then the marker, in that order."""

    def __init__(self, plan: Plan):
        self.plan = plan

    def process(self, _: Any, shards: Any, rejected: Any, totals: Any) -> Iterator[Any]:
        plan = self.plan
        _write_text(records.join(plan.out_dir, LABELS_FILE), "".join(f"{c}\n" for c in plan.labels))
        rejected = sorted(rejected)
        _write_text(
            records.join(plan.out_dir, REJECTED_FILE),
            "".join(f"{one_field(path)}\t{one_field(reason)}\n" for path, _, reason, _ in rejected),
        )
        manifest = make_manifest(plan, shards, rejected, totals)
        if manifest["splits"][TRAIN]["examples"] == 0:
            raise NoImages(
                f"no image in {plan.image_dir} could be converted ({len(rejected)} rejected, "
                f"see {records.join(plan.out_dir, REJECTED_FILE)}); no marker written"
            )
        _write_text(records.join(plan.out_dir, MANIFEST_FILE), json.dumps(manifest, indent=2) + "\n")
        _write_text(records.join(plan.out_dir, plan.marker), "")  # last: the dataset is complete
        yield manifest


def one_field(text: str) -> str:
    """A path or a reason as one field of rejected.txt's lines (path, a tab, reason): as it is, unless
    it holds a character that is not printable (a tab, a line break, a control character: a file
    named so would forge a line) or starts with a double quote; then as a JSON string, which
    escapes them (read back: `json.loads(field) if field.startswith('"') else field`)."""
    return text if text.isprintable() and not text.startswith('"') else json.dumps(text)


def _write_text(path: str, text: str) -> None:
    handle = open_for_write(path)
    handle.write(text.encode())
    handle.close()


def make_manifest(
    plan: Plan, shards: list[dict[str, Any]], rejected: list[tuple[Any, ...]], totals: list[Any]
) -> dict[str, Any]:
    """What was converted: counts per split and class, shards, labels, source, rejections."""
    splits = {}
    for split in plan.splits():
        mine = sorted((s for s in shards if s["split"] == split), key=lambda s: s["index"])
        per_class: collections.Counter[int] = collections.Counter()
        for s in mine:
            per_class.update({int(k): v for k, v in s["per_class"].items()})
        splits[split] = {
            "pattern": records.join(plan.out_dir, f"{split}-*"),
            "examples": sum(s["examples"] for s in mine),
            "bytes": sum(s["bytes"] for s in mine),
            "resized": sum(s["resized"] for s in mine),
            "reencoded": sum(s["reencoded"] for s in mine),
            "per_class": {name: per_class.get(i, 0) for i, name in enumerate(plan.labels)},
            "shards": [{"file": s["file"], "examples": s["examples"], "bytes": s["bytes"]} for s in mine],
        }
    files, size = sum_pairs(t for _, t in totals)
    by_kind = collections.Counter(kind for _, kind, _, _ in rejected)
    return {
        "format": FORMAT,
        "out_dir": plan.out_dir,
        "created": plan.created,
        "tool": plan.tool,
        "runner": plan.runner,
        "source": {
            "image_dir": plan.image_dir,
            "eval_dir": plan.eval_dir,
            "eval_fraction": plan.eval_fraction,
            "files": files,
            "bytes": size,
        },
        "options": {
            k: v
            for k, v in asdict(plan).items()
            if k in ("seed", "shards", "eval_shards", "target_shard_bytes", "max_side", "jpeg_quality")
        },
        "labels": list(plan.labels),
        "num_classes": len(plan.labels),
        "splits": splits,
        "rejected": {
            "count": len(rejected),
            "file": REJECTED_FILE,
            "by_kind": dict(sorted(by_kind.items())),
            "per_class": {
                name: n
                for name, n in sorted(
                    collections.Counter(plan.labels[label] for *_, label in rejected).items()
                )
            },
        },
        "marker": plan.marker,
        "trainer": {
            "train_data": splits[TRAIN]["pattern"],
            "eval_data": splits[EVAL]["pattern"] if EVAL in splits else None,
            "num_classes": len(plan.labels),
        },
    }


def build(pipeline: beam.Pipeline, plan: Plan) -> Any:
    """Add the conversion to `pipeline`; returns the PCollection holding the one manifest."""
    listed = (
        pipeline
        | "ClassFolders" >> beam.Create(plan.folders())
        | "Spread" >> beam.Reshuffle()  # list the folders on many workers at once
        | "List" >> beam.ParDo(ListFolder(plan))
    )
    totals = (
        listed | "SplitOfEach" >> beam.Map(split_and_size) | "TotalPerSplit" >> beam.CombinePerKey(sum_pairs)
    )
    counts = totals | "ShardCount" >> beam.Map(shard_count, plan)
    keyed = listed | "Assign" >> beam.Map(assign, counts=beam.pvalue.AsDict(counts))
    empty = counts | "EveryShard" >> beam.FlatMap(slots)
    written = (
        (keyed, empty)
        | "Both" >> beam.Flatten()
        | "ByShard" >> beam.GroupByKey()
        | "Write" >> beam.ParDo(WriteShard(plan)).with_outputs(REJECTED, main="shards")
    )
    return (
        pipeline
        | "Once" >> beam.Create([None])
        | "Finalize"
        >> beam.ParDo(
            Finalize(plan),
            shards=beam.pvalue.AsList(written.shards),
            rejected=beam.pvalue.AsList(written[REJECTED]),
            totals=beam.pvalue.AsList(totals),
        )
    )
