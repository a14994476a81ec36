"""Run the conversion: check the request, list the classes, then run the Beam pipeline here
(DirectRunner) or submit it to Dataflow. The launcher's side only; workers never import this.

`convert(conversion, runner, settings=...)` is the one entry; `dry_run_text` shows what a
Dataflow submit would send, and `summary_text` turns the manifest into the printed summary.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import tempfile
import time
import unicodedata
from importlib import metadata
from typing import TYPE_CHECKING, Any

from vertex_trainer import lazy
from vertex_trainer.dataprep import records, staging
from vertex_trainer.dataprep.request import DEFAULT_MARKER as DEFAULT_MARKER
from vertex_trainer.dataprep.request import Conversion as Conversion
from vertex_trainer.dataprep.request import Result as Result
from vertex_trainer.dataprep.request import Runner as Runner
from vertex_trainer.dataprep.request import check, normalize
from vertex_trainer.errors import JobFailed, ServiceError, UserError
from vertex_trainer.gcp import storage
from vertex_trainer.log import Log
from vertex_trainer.settings import Settings
from vertex_trainer.sizes import human_size

if TYPE_CHECKING:
    from vertex_trainer.dataprep.pipeline import Plan

beam = lazy.module("apache_beam")  # imported on first use (vertex_trainer.lazy)

_GLOB_CHARS = set("*?[]{}")
_UNPRINTABLE = {"Cc", "Zl", "Zp"}  # control characters (C0, DEL, C1) and Unicode line breaks


# -- pipeline options -------------------------------------------------------------------------
def default_job_name(now: datetime.datetime | None = None) -> str:
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return f"vertex-trainer-data-{now:%Y%m%d-%H%M%S}"


def temp_location(conv: Conversion, runner: Runner) -> str:
    if runner.temp_location:
        return runner.temp_location.rstrip("/")
    bucket = conv.out_dir[len("gs://") :].split("/", 1)[0]
    return f"gs://{bucket}/tmp/dataflow"


def pipeline_args(
    conv: Conversion, runner: Runner, *, job_name: str | None = None, extra_package: str | None = None
) -> list[str]:
    """The Beam pipeline options, exactly as passed (the user's --beam-option values last)."""
    if runner.name == "direct":
        args = [
            "--runner=DirectRunner",
            f"--direct_num_workers={runner.direct_workers}",
            "--direct_running_mode=" + ("in_memory" if runner.direct_workers == 1 else "multi_processing"),
        ]
        return args + list(runner.options)
    args = [
        "--runner=DataflowRunner",
        f"--project={runner.project}",
        f"--region={runner.region}",
        f"--temp_location={temp_location(conv, runner)}",
        f"--job_name={job_name or runner.job_name or default_job_name()}",
        f"--extra_package={extra_package or staging.wheel_name()}",
        "--labels=vertex-trainer=data-convert",
    ]
    if runner.max_workers:
        args.append(f"--max_num_workers={runner.max_workers}")
    if runner.machine_type:
        args.append(f"--worker_machine_type={runner.machine_type}")
    return args + list(runner.options)


def console_url(project: str, region: str, job_id: str) -> str:
    return f"https://console.cloud.google.com/dataflow/jobs/{region}/{job_id}?project={project}"


def dry_run_text(conv: Conversion, runner: Runner) -> str:
    """What `convert` would do and send; lists nothing, builds nothing, sends nothing."""
    conv = normalize(conv)
    check(conv, runner)
    where = "Dataflow" if runner.name == "dataflow" else "this machine (DirectRunner)"
    lines = [
        f"dry run: convert {conv.image_dir} -> {conv.out_dir} on {where}; nothing was sent",
        "",
        "pipeline options:",
    ]
    lines += [f"  {arg}" for arg in pipeline_args(conv, runner)]
    if runner.name == "dataflow":
        lines += [
            "",
            f"worker package (built and staged at submit): {staging.wheel_name()}",
            f"  modules: vertex_trainer.dataprep ({', '.join(staging.WORKER_MODULES)})",
            f"  requires: {', '.join(staging.requirements())} (apache-beam comes with the worker image)",
        ]
    shards = conv.shards or f"auto (~{conv.target_shard_mb} MB each)"
    split = (
        f"--eval-dir {conv.eval_dir}"
        if conv.eval_dir
        else f"{conv.eval_fraction:.0%} of each class"
        if conv.eval_fraction
        else "none"
    )
    stored = (
        f"larger than {conv.max_side} px resized, as JPEG q{conv.jpeg_quality}"
        if conv.max_side
        else "stored as they are (JPEG/PNG)"
    )
    lines += [
        "",
        "conversion:",
        f"  train shards: {shards}",
        f"  validation: {split}",
        f"  seed: {conv.seed}",
        f"  images: {stored}",
        f"  finally: labels.txt, rejected.txt, manifest.json, then {conv.marker}",
    ]
    return "\n".join(lines)


# -- listing (the launcher lists only the class folders) --------------------------------------
def list_classes(tree: str, settings: Settings, flag: str) -> tuple[list[str], int]:
    """(sorted class folder names, files lying directly in `tree`)."""
    if tree.startswith("gs://"):
        return _list_gcs_classes(tree, settings, flag)
    if not os.path.isdir(tree):
        raise UserError(
            f"{flag} {tree!r} is not a directory",
            hint="give a folder with one sub-folder of images per class",
        )
    names, stray = [], 0
    with os.scandir(tree) as entries:
        for entry in entries:
            if entry.name.startswith("."):
                continue  # hidden: .git, .ipynb_checkpoints, macOS's ._* files
            if entry.is_dir():
                names.append(entry.name)
            else:
                stray += 1
    return sorted(names), stray


def _list_gcs_classes(tree: str, settings: Settings, flag: str) -> tuple[list[str], int]:
    from google.api_core import exceptions as gexc

    bucket, prefix = storage.split_uri(tree + "/")
    try:
        blobs = storage.client(settings).list_blobs(bucket, prefix=prefix, delimiter="/")
        stray = sum(1 for blob in blobs if blob.name != prefix)  # reading the pages fills .prefixes
        names = sorted(
            n for n in (p[len(prefix) :].rstrip("/") for p in blobs.prefixes) if not n.startswith(".")
        )
    except gexc.NotFound:
        raise UserError(f"{flag} {tree}: bucket gs://{bucket} does not exist") from None
    except gexc.Forbidden as e:
        raise ServiceError(
            f"{flag} {tree}: no permission to list it: {e.message}",
            hint="the account needs roles/storage.objectViewer on the bucket",
        ) from None
    except gexc.GoogleAPIError as e:
        raise ServiceError(f"{flag} {tree}: listing failed: {e}") from None
    return names, stray


def _refuse_unprintable(names: list[str], tree: str) -> None:
    """A class folder's name is a label: a line of labels.txt, a row of the summary printed here.
    A line break in it (a file name may hold one, an object name too) would make labels.txt one
    line longer and every later label one off for whoever reads it by line; an escape character
    would reach the terminal. Exit 2 naming the folder as Python writes it."""
    for name in names:
        if any(unicodedata.category(ch) in _UNPRINTABLE for ch in name):
            raise UserError(
                f"class folder {name!r} in {tree} has a control character or line break in its name",
                hint="rename it: a class name is one line of labels.txt",
            )


def _classes(conv: Conversion, settings: Settings) -> tuple[list[str], list[str], list[str]]:
    """(labels, eval classes, warnings)."""
    warnings = []
    labels, stray = list_classes(conv.image_dir, settings, "IMAGE_DIR")
    if not labels:
        raise UserError(
            f"IMAGE_DIR {conv.image_dir}: no class folders found",
            hint=f"expected {conv.image_dir}/<class>/<image>, one folder per class",
        )
    if stray:
        warnings.append(f"{stray} file(s) directly in {conv.image_dir} are in no class folder: not converted")
    bad = [c for c in labels if _GLOB_CHARS & set(c)]
    if bad:
        raise UserError(
            f"class folder {bad[0]!r} has a wildcard character ({''.join(sorted(_GLOB_CHARS))})",
            hint="rename it: folder names are matched as patterns",
        )
    _refuse_unprintable(labels, conv.image_dir)
    eval_classes: list[str] = []
    if conv.eval_dir:
        eval_classes, _ = list_classes(conv.eval_dir, settings, "--eval-dir")
        _refuse_unprintable(eval_classes, conv.eval_dir)
        unknown = sorted(set(eval_classes) - set(labels))
        if unknown:
            raise UserError(
                f"--eval-dir {conv.eval_dir}: class folder(s) {', '.join(unknown[:5])} are not in IMAGE_DIR",
                hint="labels come from IMAGE_DIR's folders; "
                "the validation tree must use the same folder names",
            )
        missing = sorted(set(labels) - set(eval_classes))
        if missing:
            warnings.append(f"--eval-dir has no folder for {len(missing)} class(es), e.g. {missing[0]}")
    return labels, eval_classes, warnings


# -- output directory -------------------------------------------------------------------------
def _existing(conv: Conversion) -> list[str]:
    FileSystems = beam.io.filesystems.FileSystems

    from vertex_trainer.dataprep import pipeline as pl  # (apache_beam at its top)

    names = [
        conv.marker,
        pl.MANIFEST_FILE,
        pl.LABELS_FILE,
        pl.REJECTED_FILE,
        f"{pl.TRAIN}-*-of-*",
        f"{pl.EVAL}-*-of-*",
    ]
    found: list[str] = []
    for result in FileSystems.match([records.join(conv.out_dir, n) for n in names]):
        found += [m.path for m in result.metadata_list]
    return found


def prepare_out_dir(conv: Conversion, log: Log) -> None:
    """Refuse to mix two datasets; with --overwrite remove the old one, its marker first."""
    FileSystems = beam.io.filesystems.FileSystems

    found = _existing(conv)
    if not found:
        return
    if not conv.overwrite:
        raise UserError(
            f"OUT_DIR {conv.out_dir} already holds a dataset ({len(found)} files, e.g. "
            f"{os.path.basename(sorted(found)[0])})",
            hint="pass --overwrite to replace it, or choose another OUT_DIR",
        )
    marker = records.join(conv.out_dir, conv.marker)
    first = [p for p in found if p == marker]  # a trigger must never see a marker over old shards
    FileSystems.delete(first)
    rest = [p for p in found if p != marker]
    if rest:
        FileSystems.delete(rest)
    log(f"removed the previous dataset in {conv.out_dir} ({len(found)} files)")


# -- running ----------------------------------------------------------------------------------
def _tool_version() -> str:
    try:
        return f"vertex-trainer {metadata.version('vertex-trainer')}"
    except metadata.PackageNotFoundError:
        return "vertex-trainer"


def make_plan(conv: Conversion, runner: Runner, labels: list[str], eval_classes: list[str]) -> Plan:
    from vertex_trainer.dataprep.pipeline import Plan  # (apache_beam at its top)

    return Plan(
        image_dir=conv.image_dir,
        out_dir=conv.out_dir,
        labels=tuple(labels),
        eval_dir=conv.eval_dir,
        eval_classes=tuple(eval_classes),
        eval_fraction=conv.eval_fraction,
        shards=conv.shards,
        eval_shards=conv.eval_shards,
        target_shard_bytes=conv.target_shard_mb * 2**20,
        seed=conv.seed,
        max_side=conv.max_side,
        jpeg_quality=conv.jpeg_quality,
        marker=conv.marker,
        read_threads=conv.read_threads,
        created=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        tool=_tool_version(),
        runner=runner.name,
    )


def convert(conv: Conversion, runner: Runner, *, settings: Settings, log: Log = print) -> Result:
    """Convert (DirectRunner) or submit the conversion (Dataflow). Raises UserError before
    anything is written when the request or the input tree is wrong."""
    conv = normalize(conv)
    check(conv, runner)
    beam.load()  # Beam is the data extra: the one "install vertex-trainer[data]" message if missing
    if settings.storage_emulator:
        _anonymous_beam_gcs()
    labels, eval_classes, warnings = _classes(conv, settings)
    for w in warnings:
        log(f"warning: {w}")
    prepare_out_dir(conv, log)
    plan = make_plan(conv, runner, labels, eval_classes)
    if runner.name == "dataflow":
        result = _submit_dataflow(conv, runner, plan, log)
    else:
        result = _run_direct(conv, runner, plan)
    result.warnings = warnings
    return result


def _anonymous_beam_gcs() -> None:
    """With a Cloud Storage emulator, let Beam's gs:// filesystem connect anonymously at once.

    Beam looks for Application Default Credentials with four retries (about 17 s, and a
    traceback in the log) before it falls back to an anonymous client; the anonymous client is
    what an emulator needs (google-cloud-storage itself honours STORAGE_EMULATOR_HOST). Beam
    caches that lookup in `_Credentials`: fill the cache with "no credentials".

    Why a private name: Beam has no public way to say "no credentials" to its gs:// filesystem.
    Its `--no_auth` option (GoogleCloudOptions.no_auth) is read only by the Dataflow runner
    (apache_beam/runners/dataflow/internal/apiclient.py); GcsIO's `create_storage_client`
    (apache_beam/io/gcp/gcsio.py, 2.77) always calls `auth.get_service_credentials`, whose ADC
    lookup is wrapped in `retry.with_exponential_backoff(num_retries=4, initial_delay_secs=2)`.
    No upstream issue asks GcsIO to honour --no_auth (searched 2026-12-01); when Beam does, pass
    `--no_auth` in `pipeline_args` instead and delete this. Only the emulator path uses it, and a
    Beam without these names only waits longer (the except below).
    """
    try:
        creds = beam.internal.gcp.auth._Credentials
        with creds._credentials_lock:
            if not creds._credentials_init:
                creds._credentials, creds._credentials_init = None, True
    except AttributeError:  # another Beam: it only waits longer
        pass


def _run_direct(conv: Conversion, runner: Runner, plan: Plan) -> Result:
    PipelineOptions = beam.options.pipeline_options.PipelineOptions

    from vertex_trainer.dataprep import pipeline as pl  # (apache_beam at its top)

    # Each worker process logs start-up warnings about options it ignores; keep real errors, for
    # this run only (a notebook's later Beam runs keep the level they had).
    quiet = logging.getLogger("apache_beam.runners.portability.local_job_service")
    level = quiet.level
    if runner.direct_workers > 1:
        quiet.setLevel(logging.ERROR)
    start = time.monotonic()
    p = beam.Pipeline(options=PipelineOptions(pipeline_args(conv, runner)))
    pl.build(p, plan)
    try:
        run = p.run()
        run.wait_until_finish()
    except Exception as e:  # Beam wraps a DoFn's exception in its own, with the worker traceback
        if "NoImages" in f"{type(e).__name__} {e}":
            raise UserError(
                f"no image in {conv.image_dir} could be converted; no marker written",
                hint=f"see {records.join(conv.out_dir, pl.REJECTED_FILE)}",
            ) from None
        raise JobFailed(
            f"the conversion failed: {_last_line(e)}",
            hint="run with --debug for the full traceback; no marker was written",
        ) from e
    finally:
        quiet.setLevel(level)
    counters = {
        c.key.metric.name: c.committed
        for c in run.metrics().query()["counters"]
        if c.key.metric.namespace == pl.NAMESPACE
    }
    return Result(
        "direct",
        time.monotonic() - start,
        manifest=read_manifest(conv.out_dir),
        counters=dict(sorted(counters.items())),
    )


def read_manifest(out_dir: str) -> dict[str, Any]:
    FileSystems = beam.io.filesystems.FileSystems

    from vertex_trainer.dataprep.pipeline import MANIFEST_FILE  # (apache_beam at its top)

    with FileSystems.open(records.join(out_dir, MANIFEST_FILE)) as f:
        manifest: dict[str, Any] = json.loads(f.read())
    return manifest


def _submit_dataflow(conv: Conversion, runner: Runner, plan: Plan, log: Log) -> Result:
    PipelineOptions = beam.options.pipeline_options.PipelineOptions

    from vertex_trainer.dataprep import pipeline as pl  # (apache_beam at its top)

    start = time.monotonic()
    job_name = runner.job_name or default_job_name()
    with tempfile.TemporaryDirectory(prefix="vertex-trainer-dataflow-") as tmp:
        wheel = staging.build_wheel(tmp)
        args = pipeline_args(conv, runner, job_name=job_name, extra_package=str(wheel))
        try:
            p = beam.Pipeline(options=PipelineOptions(args))
        except ValueError as e:  # Beam's own option checks (bucket names, ...)
            raise UserError(f"Dataflow pipeline options: {_last_line(e)}") from None
        pl.build(p, plan)
        log(f"submitting {job_name} to Dataflow ({runner.project}, {runner.region}); staging {wheel.name}")
        _quiet_wheel_warning()
        try:
            result = p.run()
        except Exception as e:  # credentials, a disabled API, quota: one line, not a traceback
            raise ServiceError(
                f"Dataflow refused the job: {_last_line(e)}",
                hint="the account needs roles/dataflow.developer and the Dataflow API "
                "enabled; the workers' service account needs the buckets",
            ) from e
    if not hasattr(result, "job_id"):  # --beam-option=--dry_run=True: Beam translated the job, sent nothing
        log(f"Beam's dry run: {job_name} was translated for Dataflow and not submitted")
        return Result("dataflow", time.monotonic() - start, job_name=job_name)
    job_id = result.job_id()
    out = Result(
        "dataflow",
        time.monotonic() - start,
        job_name=job_name,
        job_id=job_id,
        console_url=console_url(runner.project or "", runner.region or "", job_id),  # check()ed
    )
    if runner.wait:
        log(f"following {out.console_url}")
        state = result.wait_until_finish()
        if str(state).upper().rsplit(".", 1)[-1] != "DONE":
            raise JobFailed(
                f"Dataflow job {job_id} ended {state}; no marker was written", hint=f"see {out.console_url}"
            )
        out.manifest = read_manifest(conv.out_dir)
        out.seconds = time.monotonic() - start
    return out


class _DropWheelWarning:
    """Beam warns that any staged .whl "must be binary-compatible with the worker": ours is
    pure Python (py3-none-any)."""

    @staticmethod
    def filter(record: logging.LogRecord) -> bool:
        return "must be binary-compatible" not in record.getMessage()


def _quiet_wheel_warning() -> None:
    stager = logging.getLogger("apache_beam.runners.portability.stager")
    if not any(isinstance(f, _DropWheelWarning) for f in stager.filters):
        stager.addFilter(_DropWheelWarning())


def _last_line(error: Exception) -> str:
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


# -- the summary ------------------------------------------------------------------------------
def _class_warnings(manifest: dict[str, Any]) -> list[str]:
    """A class folder with no training image (empty, or every file rejected: a folder of notes, a
    typo'd copy) is still a label, counted in num_classes: the model gets an output it never
    learns. Said, with the labels, when the train split has images at all."""
    train = manifest["splits"].get("train")
    if not train or not train["examples"]:
        return []
    labels = manifest["labels"]
    empty = [(i, c) for i, c in enumerate(labels) if not train["per_class"].get(c, 0)]
    if not empty:
        return []
    shown = ", ".join(f"{c} (label {i})" for i, c in empty[:10]) + (
        f" and {len(empty) - 10} more" if len(empty) > 10 else ""
    )
    return [
        f"warning: {len(empty)} of {len(labels)} classes have no training image: {shown}; "
        f"num_classes {len(labels)} counts them and the model gets an output it never learns "
        "(if they are no classes, move those folders out of IMAGE_DIR and convert again with "
        "--overwrite)"
    ]


def summary_text(manifest: dict[str, Any], seconds: float | None = None) -> str:
    """Counts per split and class, rejections, bytes, and the spec values to train on it."""
    splits = manifest["splits"]
    images = sum(s["examples"] for s in splits.values())
    rejected = manifest["rejected"]
    source = manifest["source"]
    head = f"converted {images} images ({human_size(source['bytes'])} in {source['files']} files)"
    if seconds:
        head += f" in {seconds:.1f} s, {images / seconds:.0f} images/s"
    lines = [head, "", f"  {'split':<12} {'images':>9} {'shards':>7} {'bytes':>10}"]
    for name, s in splits.items():
        lines.append(f"  {name:<12} {s['examples']:>9} {len(s['shards']):>7} {human_size(s['bytes']):>10}")
    width = max(12, *(len(c) for c in manifest["labels"]))
    lines += ["", f"  {'class':<{width}} " + " ".join(f"{n:>10}" for n in splits) + f" {'rejected':>9}"]
    shown = manifest["labels"] if len(manifest["labels"]) <= 30 else manifest["labels"][:25]
    for c in shown:
        lines.append(
            f"  {c:<{width}} "
            + " ".join(f"{s['per_class'][c]:>10}" for s in splits.values())
            + f" {rejected['per_class'].get(c, 0):>9}"
        )
    if len(shown) < len(manifest["labels"]):
        lines.append(f"  ... {len(manifest['labels']) - len(shown)} more classes in manifest.json")
    kinds = ", ".join(f"{n} {k}" for k, n in rejected["by_kind"].items())
    lines += [
        "",
        f"rejected: {rejected['count']}"
        + (
            f" ({kinds}), listed in {records.join(manifest['out_dir'], rejected['file'])}"
            if rejected["count"]
            else ""
        ),
    ]
    for name, s in splits.items():
        if s["examples"] == 0:
            lines.append(f"warning: the {name} split is empty")
    lines += _class_warnings(manifest)
    t = manifest["trainer"]
    lines += [
        f"wrote manifest.json, then {manifest['marker']}",
        "",
        f"train on it: trainer.train_data: {t['train_data']}",
    ]
    if t["eval_data"]:
        lines.append(f"              trainer.eval_data: {t['eval_data']}")
    lines.append(f"              trainer.num_classes: {t['num_classes']}")
    return "\n".join(lines)
