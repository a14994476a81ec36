"""The rules that span several fields of a spec, and the extra checks before a cloud submit.

`check(spec)` runs from JobSpec's own validator, so every JobSpec has passed them. Each rule
raises SpecError; `problems` runs them all and collects every problem (the rules that need valid
hardware run only when it is), so one validate answers with everything there is to fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from vertex_trainer import hardware as hw
from vertex_trainer import regions
from vertex_trainer.contract import ATTEMPT_LABEL, MAX_USER_LABELS, RESERVED_LABELS, RESUMES_LABEL, VERTEX_ENV
from vertex_trainer.errors import SpecError, SpecProblems
from vertex_trainer.spec.attempts import attempts, reservation_zone, zone_region
from vertex_trainer.spec.deploy_block import deploy_rules
from vertex_trainer.spec.images import latest_warning, validate_image_values
from vertex_trainer.spec.plan_rules import check_fallback, check_persistent_resource, check_reservations
from vertex_trainer.spec.tune import grid_warning, tune_rules

if TYPE_CHECKING:  # model.py imports this module (directly or through the rules): named for the type checker
    from vertex_trainer.spec.model import JobSpec

Rule = Callable[["JobSpec"], None]


def check(spec: JobSpec) -> None:
    """Raise SpecError (one problem) or SpecProblems (several) unless every rule holds."""
    raise_all(problems(spec))


def raise_all(found: list[SpecError]) -> None:
    if len(found) == 1:
        raise found[0]
    if found:
        raise SpecProblems(found)


def problems(spec: JobSpec) -> list[SpecError]:
    """Every cross-field problem of `spec`, in the order a reader would fix them."""
    found: list[SpecError] = []

    def run(*rules: Rule) -> bool:
        ok = True
        for rule in rules:
            try:
                rule(spec)
            except SpecError as e:
                found.extend(e.problems)
                ok = False
        return ok

    run(_region)
    # A field whose region is a typo is reported once, by _region (not again as "outside the region").
    typos, region_count = {p.field for p in found}, len(found)
    hardware_ok = run(_hardware)
    if hardware_ok:
        run(_scheduling, check_fallback, check_reservations, check_persistent_resource)
    run(_labels, _env)
    if hardware_ok:
        run(_boot_disk)
    run(_tensorboard, _encryption_key, _output_dir, _data_paths, deploy_rules, tune_rules)
    if hardware_ok:
        run(_trainer)
    # Image values can reach a Dockerfile or a shell: the packager's checks run at validate time too.
    run(validate_image_values)
    return found[:region_count] + [p for p in found[region_count:] if p.field not in typos]


def warnings(spec: JobSpec) -> list[str]:
    """What a spec asks that is valid but has no effect (validate and a cloud submit print each
    line on stderr; nothing stops)."""
    s = spec.scheduling
    out = []
    if s.max_wait is not None and not any(a.strategy == "flex-start" for a in attempts(spec)):
        # A strategy switched on the command line (--set scheduling.strategy=spot) keeps the file's
        # max_wait: the job is still what the user asked, and the CustomJob has no max wait.
        out.append(
            f"warning: scheduling.max_wait is ignored: it applies to flex-start, and the "
            f"strategy is {s.strategy!r} (remove max_wait, or list flex-start in "
            "scheduling.fallback)"
        )
    latest = latest_warning(spec.image) if spec.image is not None else None
    if latest:
        out.append(latest)
    grid = grid_warning(spec)
    if grid:
        out.append(grid)
    m = hw.machine(spec.hardware.machine_type)
    if m is not None and m.arch != "amd64":  # A4X: Arm CPUs (catalog/machines.csv, `arch`)
        out.append(
            f"warning: hardware: {m.name} runs {m.arch} CPUs: the image must be built for "
            f"linux/{m.arch} (an amd64 image fails to start there)"
        )
    return out


def cloud_problems(spec: JobSpec) -> None:
    """Raise SpecError for values that only work locally (checked before a cloud submit)."""
    found: list[SpecError] = []
    if not spec.project:
        found.append(
            SpecError(
                "project",
                "is required to submit to Vertex AI",
                has_value=False,
                hint="add `project:` to the spec, pass --project, or set GOOGLE_CLOUD_PROJECT",
            )
        )
    if not spec.region:
        found.append(
            SpecError(
                "region",
                "is required to submit to Vertex AI (--local needs none)",
                has_value=False,
                hint="add `region: us-central1` to the spec, or pass --region",
            )
        )
    if spec.image is None:
        found.append(
            SpecError(
                "image",
                "is required to submit to Vertex AI (--local runs the installed trainer and needs none)",
                has_value=False,
                hint="image.repository: REGION-docker.pkg.dev/PROJECT/REPO/trainer builds the "
                "trainer; image.uri: an existing image; image.python_package: true: no Docker",
            )
        )
    elif spec.image.code and not spec.image.builds:
        found.append(
            SpecError(
                "image",
                "has image.code but no way to package it for Vertex AI (a spec for --local needs "
                "none; a cloud job does)",
                has_value=False,
                hint="add image.repository: REGION-docker.pkg.dev/PROJECT/REPO/NAME (an image of "
                "your code, tagged by its content hash) or image.python_package: true (no Docker)",
            )
        )
    if spec.output_dir and not spec.output_dir.startswith("gs://"):
        found.append(
            SpecError(
                "output_dir",
                "must be a gs:// path for a cloud job (local paths work with --local)",
                value=spec.output_dir,
                hint="e.g. output_dir: gs://my-bucket/runs/{{ name }}",
            )
        )
    for field, value in _data_fields(spec):
        if value and not all(p.startswith(("gs://", "/gcs/")) for p in split_patterns(value)):
            found.append(
                SpecError(
                    f"trainer.{field}",
                    "must be gs:// or /gcs/ for a cloud job (local paths work with --local)",
                    value=value,
                    hint="upload the TFRecords to Cloud Storage first",
                )
            )
    raise_all(found)


# -- hardware and scheduling ----------------------------------------------------------------------


def _hardware(spec: JobSpec) -> None:
    # A multi-host TPU slice runs the bundled trainer too: every host joins (trainer/tpu_slice.py,
    # docs/trainer.md "Multi-host TPU slices").
    h = spec.hardware
    hw.check_hardware("hardware", h.machine_type, h.accelerator_type, h.accelerator_count, h.tpu_topology)


def _region(spec: JobSpec) -> None:
    """Every field that names a region (the spec's, each fallback entry's, the region of a
    persistent resource, TensorBoard instance or KMS key, a reservation's zone) must name one
    Vertex AI training has: a typo (us-central9) is exit 2 naming the field, the value and the
    nearest regions, before anything is sent (the table: regions.py)."""
    raise_all(
        [
            p
            for p in (region_problem(field, value, kind=kind) for field, value, kind in _region_fields(spec))
            if p
        ]
    )


def region_problem(field: str, value: str | None, *, kind: str = "region") -> SpecError | None:
    """The one message for a region field whose value is not a Vertex AI training region (None
    when it is, or is empty): the field, the value, the nearest regions (suggest.py).

    Args:
        field: the dotted field path (e.g. scheduling.fallback[1].region).
        value: the region written there; with kind "zone" a zone (us-central1-a), whose region
            is checked and whose suggestions keep its zone letter.
        kind: "region" (the field is a region), "malformed" (a region of the wrong form, e.g.
            uscentral1), "zone", or "name" (the region inside a resource name,
            projects/P/locations/REGION/...).
    Returns:
        The SpecError to raise, or None."""
    if not value:
        return None
    region = zone_region(value) if kind == "zone" else value
    suffix = value[len(region) :]  # a zone's "-a": the suggestions keep it
    if regions.known(region):
        return None
    what = {
        "zone": f"zone {value!r} is not in a Vertex AI training region",
        "name": f"the region in the name, {value!r}, is not a Vertex AI training region",
        "malformed": f"{value!r} has an invalid format: not a Vertex AI training region",
    }.get(kind, f"{value!r} is not a Vertex AI training region")
    hint = regions.unknown_hint(region, suffix)
    return SpecError(field, f"{what} (the table of {regions.READ})", has_value=False, hint=hint)


def _region_fields(spec: JobSpec) -> list[tuple[str, str, str]]:
    """(field, value, kind) of every region the spec names, in the spec's order (kind: see
    region_problem)."""
    s = spec.scheduling
    out: list[tuple[str, str | None, str]] = [
        ("region", spec.region, "region"),
        ("scheduling.reservation", reservation_zone(s.reservation), "zone"),
    ]
    for i, entry in enumerate(s.fallback or ()):
        if not isinstance(entry, str):
            out.append((f"scheduling.fallback[{i}].region", entry.region, "region"))
            out.append((f"scheduling.fallback[{i}].reservation", reservation_zone(entry.reservation), "zone"))
    named = (
        ("persistent_resource", spec.persistent_resource),
        ("tensorboard", spec.tensorboard),
        ("encryption_key", spec.encryption_key),
    )
    for field, given in named:
        value = given or ""
        if value.startswith("projects/"):  # (an id names no region: the job's)
            out.append((field, regions.region_of(value), "name"))
    return [(field, value, kind) for field, value, kind in out if value]


def _scheduling(spec: JobSpec) -> None:
    h, s = spec.hardware, spec.scheduling
    # max_wait belongs to a flex-start fallback too: _fallback checks it there. With no flex-start
    # in the plan it is ignored, with a warning (warnings(): e.g. --set scheduling.strategy=spot).
    waits = s.strategy == "flex-start" and not any(a.strategy == "flex-start" for a in attempts(spec)[1:])
    max_wait = s.max_wait if waits else None
    hw.check_scheduling(
        hardware_field="hardware",
        machine_type=h.machine_type,
        accelerator_type=h.accelerator_type,
        strategy=s.strategy,
        max_wait=max_wait,
        timeout=s.timeout,
        restart=s.restart_on_worker_restart,
        disable_retries=s.disable_retries,
        replicas=spec.replicas,
        tpu_topology=h.tpu_topology,
    )


def _boot_disk(spec: JobSpec) -> None:
    machine, disk = spec.hardware.machine_type, spec.boot_disk.type
    if disk and disk.startswith("pd-") and hw.boots_from_hyperdisk(machine):
        raise SpecError(
            "boot_disk.type",
            f"{machine} boots only from hyperdisk-balanced",
            value=disk,
            hint="set boot_disk.type: hyperdisk-balanced or remove it",
        )


# -- labels and environment -----------------------------------------------------------------------

_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _labels(spec: JobSpec) -> None:
    labels = spec.labels
    fallback = bool(spec.scheduling.fallback)  # then every job carries the attempt label too
    limit = MAX_USER_LABELS - fallback
    if len(labels) > limit:
        raise SpecError(
            "labels",
            f"{len(labels)} labels; at most {limit} (Vertex allows 64, "
            f"vertex-trainer adds {len(RESERVED_LABELS) + fallback})",
            has_value=False,
            hint="remove some labels",
        )
    for key, value in labels.items():
        if key in RESERVED_LABELS or key in (ATTEMPT_LABEL, RESUMES_LABEL) or key.startswith("goog"):
            raise SpecError(
                f"labels.{key}",
                "is reserved (set by vertex-trainer or Google)",
                has_value=False,
                hint="use another key; the idempotency key comes from --idempotency-key",
            )
        if not _LABEL_KEY.match(key):
            raise SpecError(
                f"labels.{key}",
                "invalid label key: 1-63 chars of a-z, 0-9, _ or -, starting with a lowercase letter",
                has_value=False,
                hint=f"e.g. {_label_safe(key) or 'team'}",
            )
        if not _LABEL_VALUE.match(value):
            raise SpecError(
                f"labels.{key}",
                "invalid label value: 0-63 chars of a-z, 0-9, _ or -",
                value=value,
                hint=f"e.g. {_label_safe(value)!r}",
            )


def _label_safe(text: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-")[:63]


def _env(spec: JobSpec) -> None:
    for key, value in spec.env.items():
        if not _ENV_NAME.match(key):
            raise SpecError(
                f"env.{key}",
                "is not a valid environment variable name",
                has_value=False,
                hint="use letters, digits and _; not starting with a digit",
            )
        if key in VERTEX_ENV:
            raise SpecError(
                f"env.{key}",
                "is set by Vertex AI in every replica and cannot be overridden",
                has_value=False,
                hint="remove it; use output_dir for the AIP_* directories",
            )
        if "\x00" in value:
            raise SpecError(f"env.{key}", "contains a NUL byte", has_value=False, hint="remove it")


# -- resources in the job's region ----------------------------------------------------------------


def _tensorboard(spec: JobSpec) -> None:
    if not spec.tensorboard:
        return
    # auto: the instance of the job's region (each fallback attempt's own), found or made at submit.
    tb_region = spec.region if spec.tensorboard == "auto" else regions.region_of(spec.tensorboard)
    if spec.region and tb_region != spec.region:
        raise SpecError(
            "tensorboard",
            f"the TensorBoard instance is in {tb_region}, the job in {spec.region}",
            has_value=False,
            hint="use a TensorBoard instance in the job's region",
        )
    if not spec.service_account:
        raise SpecError(
            "service_account",
            f"Vertex AI requires a service account when tensorboard is set ({spec.tensorboard})",
            has_value=False,
            hint="set service_account: NAME@PROJECT.iam.gserviceaccount.com (it uploads the logs: "
            "`vertex-trainer setup SPEC` grants it what it needs)",
        )
    if not spec.output_dir:
        raise SpecError(
            "output_dir",
            f"tensorboard ({spec.tensorboard}) needs output_dir (the logs are written there)",
            has_value=False,
            hint="set output_dir: gs://BUCKET/PATH",
        )


def _encryption_key(spec: JobSpec) -> None:
    if spec.encryption_key:
        key_region = regions.region_of(spec.encryption_key)
        if spec.region and key_region != spec.region:
            raise SpecError(
                "encryption_key",
                f"the key is in {key_region}, the job in {spec.region}",
                has_value=False,
                hint="Vertex AI needs a Cloud KMS key in the job's region",
            )


# -- paths: gs://BUCKET/PATH, /gcs/ (Cloud Storage FUSE) or local ---------------------------------

_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]+):/")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def gcs_problem(uri: str) -> str | None:
    """What is wrong with a gs://BUCKET[/PATH] URI (bucket naming rules), or None."""
    bucket = uri[len("gs://") :].split("/", 1)[0]
    if not bucket:
        return "names no bucket"
    if (
        not _BUCKET.match(bucket)
        or any(len(part) > 63 or not part for part in bucket.split("."))
        or ("." not in bucket and len(bucket) > 63)
    ):
        return (
            f"{bucket!r} is not a valid bucket name: 3-63 characters of a-z, 0-9, -, _ and . "
            "(up to 222 with dots), starting and ending with a letter or digit"
        )
    if _CONTROL.search(uri):
        return "contains a control character"
    return None


def _path_problem(value: str, *, allow_fuse: bool) -> str | None:
    """Why `value` is neither gs://BUCKET/PATH nor a local path (nor /gcs/... when allowed)."""
    m = _SCHEME.match(value)
    if m is None:
        return "contains a control character" if _CONTROL.search(value) else None
    if not value.startswith("gs://"):
        if m.group("scheme").lower() == "gs":
            return "is not a gs://BUCKET/PATH URI"
        return f"{m.group('scheme')}:// is not supported: " + (
            "the trainer reads Cloud Storage (gs:// or /gcs/) or local files"
            if allow_fuse
            else "Vertex AI writes the job's outputs to Cloud Storage"
        )
    return gcs_problem(value)


def split_patterns(value: str) -> list[str]:
    """The file patterns of a data value (the trainer takes a comma-separated list)."""
    return [p.strip() for p in value.split(",") if p.strip()]


def _output_dir(spec: JobSpec) -> None:
    if spec.fixed_output_dir and not spec.output_dir:
        raise SpecError(
            "fixed_output_dir",
            "needs output_dir: it makes every submission write to output_dir itself",
            value=True,
            hint="set output_dir, or remove fixed_output_dir (each submission then gets a folder of its own)",
        )
    if spec.output_dir:
        problem = _path_problem(spec.output_dir, allow_fuse=False)
        if problem:
            raise SpecError(
                "output_dir",
                problem,
                value=spec.output_dir,
                hint="use gs://BUCKET/PATH; a local path only with --local",
            )


def _data_fields(spec: JobSpec) -> tuple[tuple[str, str | None], ...]:
    """(field, value) of the trainer's data paths; none for a job without a trainer: block (a
    script job, issue 32)."""
    t = spec.trainer
    return (("train_data", t.train_data), ("eval_data", t.eval_data)) if t is not None else ()


def _data_paths(spec: JobSpec) -> None:
    for field, value in _data_fields(spec):
        for pattern in split_patterns(value or ""):
            problem = _path_problem(pattern, allow_fuse=True)
            if problem:
                raise SpecError(
                    f"trainer.{field}",
                    problem,
                    value=value,
                    hint="use gs://BUCKET/PATH or /gcs/BUCKET/PATH; a local path only with --local",
                )


# -- the trainer's values against the hardware ----------------------------------------------------


def _trainer(spec: JobSpec) -> None:
    t = spec.trainer
    if t is None:  # script jobs (issue 32): your own code, no trainer: block
        return
    devices = spec.total_devices
    if t.batch_size is not None and t.batch_size % devices:
        fix = (t.batch_size // devices + 1) * devices
        h = spec.hardware
        machines = f" ({spec.replicas} machines x {h.devices})" if spec.replicas > 1 and h.devices > 1 else ""
        raise SpecError(
            "trainer.batch_size",
            f"the global batch {t.batch_size} does not split evenly over {devices} "
            f"{hw.device_noun(h.machine_type, h.accelerator_type)}s{machines}, one data-parallel "
            "replica each",
            has_value=False,
            hint=f"use a multiple of {devices}, e.g. {fix}",
        )
    if t.steps_per_epoch and t.steps_per_execution and t.steps_per_epoch % t.steps_per_execution:
        multiple = t.steps_per_epoch - t.steps_per_epoch % t.steps_per_execution or t.steps_per_execution
        raise SpecError(
            "trainer.steps_per_epoch",
            f"{t.steps_per_epoch} is not a multiple of steps_per_execution "
            f"{t.steps_per_execution} (Keras would run extra steps each epoch)",
            has_value=False,
            hint=f"use {multiple}",
        )
    if t.warmup_epochs and t.epochs and t.warmup_epochs >= t.epochs:
        raise SpecError(
            "trainer.warmup_epochs",
            f"{t.warmup_epochs:g} warmup epochs leave no training in {t.epochs} epochs",
            has_value=False,
            hint="use fewer warmup epochs than epochs",
        )
    accelerator = spec.hardware.accelerator
    if accelerator and accelerator.name == "TPU_V6E":
        # Vertex AI's TPU training page (catalog source tpu-vm): "Starting with TPU v6e,
        # TensorFlow isn't supported for training"; the bundled trainer is TensorFlow.
        raise SpecError(
            "hardware",
            "TPU v6e: Vertex AI does not train TensorFlow on TPU v6e (its TPU training page), "
            "and the bundled trainer is TensorFlow",
            value=spec.hardware.preset or spec.hardware.machine_type,
            hint="use a tpu-v5e-* preset for the bundled trainer, or run your own JAX or PyTorch "
            "code on v6e (image.code + image.script, no trainer:)",
        )
    if t.precision == "mixed_float16" and accelerator and accelerator.kind == "tpu":
        raise SpecError(
            "trainer.precision",
            "TPUs do not run float16",
            value="mixed_float16",
            hint="use auto or mixed_bfloat16 on TPU",
        )
