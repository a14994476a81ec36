"""The job spec: one frozen, strict model, loaded once at the edge.

Loading order (CONTRACT section 1): YAML file < `--set` overrides < `--project`/`--region` flags,
then jinja2 templating of string values, then validation. The result is a frozen `JobSpec`;
nothing downstream reads YAML, the environment or flags again.
"""

from __future__ import annotations

import configparser
import datetime as _dt
import hashlib
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from vertex_trainer import hardware as hw
from vertex_trainer.errors import SpecError, UserError

RESERVED_LABELS = ("vertex-trainer-key", "vertex-trainer-spec")
# Variables Vertex AI sets in every replica; a spec must not fight them.
VERTEX_ENV = ("AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR", "CLUSTER_SPEC",
              "TF_CONFIG", "CLOUD_ML_JOB_ID")


def _duration(value: Any) -> Any:
    return None if value is None else hw.parse_duration(value)


Duration = Annotated[
    int,
    BeforeValidator(_duration),
    WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 0},
                              {"type": "string", "pattern": r"^(\d+d)?(\d+h)?(\d+m)?(\d+s)?$|^\d+$"}],
                    "description": "seconds, or 90s, 30m, 4h, 2d, 1h30m"}),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class HardwareSpec(_Strict):
    """One machine: every replica of the job runs on the same shape."""

    machine_type: str = Field(description="Compute Engine machine type, e.g. a3-highgpu-8g")
    accelerator_type: str | None = Field(None, description="AcceleratorType enum name, e.g. NVIDIA_H100_80GB")
    accelerator_count: int = Field(0, ge=0, description="accelerators per machine")
    tpu_topology: str | None = Field(None, pattern=r"^\d+x\d+(x\d+)?$", description="TPU v5e topology, e.g. 2x2")

    @property
    def preset(self) -> str | None:
        return hw.preset_for(self.machine_type, self.accelerator_type, self.accelerator_count, self.tpu_topology)

    @property
    def accelerator(self) -> hw.Accelerator | None:
        return hw.accelerator_of(self.machine_type, self.accelerator_type)

    @property
    def devices(self) -> int:
        """Data-parallel replicas one machine contributes (GPUs, TPU chips/cores, or 1)."""
        return hw.devices_per_machine(self.machine_type, self.accelerator_type, self.accelerator_count,
                                      self.tpu_topology)

    def describe(self) -> str:
        acc = self.accelerator
        if acc is None:
            return self.machine_type
        count = self.accelerator_count or self.devices
        topo = f", topology {self.tpu_topology}" if self.tpu_topology else ""
        return f"{self.machine_type} ({count} x {acc.name}{topo})"


def _hardware(value: Any) -> Any:
    if isinstance(value, str):
        return hw.resolve_preset(value.strip())
    return value


class BootDisk(_Strict):
    type: Literal["pd-ssd", "pd-standard", "hyperdisk-balanced"] | None = Field(
        None, description="boot disk type; default pd-ssd (hyperdisk-balanced on a3-ultragpu / a4 machines)")
    size_gb: int = Field(100, ge=100, le=64000, description="boot disk size in GB")


class ImageSpec(_Strict):
    """Which code runs: an existing image, an image built from the trainer, or a Python package."""

    uri: str | None = Field(None, description="use this container image as is (no build)")
    repository: str | None = Field(
        None, description="Artifact Registry repository to build into; the tag is the build context's content hash")
    builder: Literal["cloud-build", "docker"] = Field("cloud-build", description="how to build the image")
    context: str | None = Field(None, description="a directory with its own Dockerfile; default: the bundled trainer")
    variant: Literal["auto", "gpu", "tpu", "cpu"] = Field(
        "auto", description="which Dockerfile template: auto follows the hardware")
    base_image: str | None = Field(None, description="override the variant's pinned base image")
    base_image_digest: str | None = Field(None, pattern=r"^sha256:[0-9a-f]{64}$",
                                          description="pin the base image by digest")
    pip_packages: tuple[str, ...] = Field((), description="extra pip requirements baked into the image")
    python_package: bool = Field(
        False, description="no Docker: build an sdist of the trainer and run it on a prebuilt Vertex image")
    executor_image: str | None = Field(None, description="prebuilt Vertex AI training image for python_package")
    staging_bucket: str | None = Field(
        None, pattern=r"^gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9](/[A-Za-z0-9._/-]*)?$",
        description="gs://bucket/prefix for build contexts and packages; default: <output_dir>/staging")

    @model_validator(mode="after")
    def _one_source(self) -> "ImageSpec":
        given = [k for k in ("uri", "repository") if getattr(self, k)] + (["python_package"] if self.python_package else [])
        if len(given) != 1:
            what = "none is set" if not given else f"{' and '.join(given)} are set"
            raise SpecError("image", f"set exactly one of uri, repository or python_package: true ({what})",
                            has_value=False,
                            hint="uri: an existing image; repository: build the trainer; python_package: no Docker")
        if self.executor_image and not self.python_package:
            raise SpecError("image.executor_image", "only applies with python_package: true", has_value=False,
                            hint="remove executor_image or set python_package: true")
        return self

    @property
    def builds(self) -> bool:
        """True when the code must be packaged (built or uploaded) before a cloud run."""
        return bool(self.repository or self.python_package)


class Scheduling(_Strict):
    strategy: Literal["standard", "spot", "flex-start"] = Field(
        "standard", description="standard, spot (preemptible, cheaper) or flex-start (Dynamic Workload Scheduler)")
    max_wait: Duration | None = Field(None, description="flex-start only: how long to wait for capacity (0 = forever)")
    timeout: Duration | None = Field(None, description="maximum run time (default 7d); flex-start requires <= 7d")
    restart_on_worker_restart: bool = Field(False, description="restart the whole job when a worker restarts")
    disable_retries: bool = Field(False, description="fail instead of retrying on internal errors")

    @field_validator("timeout")
    @classmethod
    def _positive(cls, v):
        if v is not None and v <= 0:
            raise ValueError("timeout must be more than 0 seconds")
        return v


class TrainerArgs(_Strict):
    """The trainer's flags (CONTRACT section 4). Unset fields fall back to the trainer's defaults."""

    model: str = Field("resnet50", pattern=r"^[a-z0-9][a-z0-9_-]*$", description="resnet50, tiny-cnn, ...")
    train_data: str = Field(description="TFRecord file pattern: local path, gs:// or /gcs/")
    eval_data: str | None = Field(None, description="TFRecord file pattern for evaluation")
    num_classes: int = Field(ge=2, description="number of classes")
    image_size: int | None = Field(None, ge=8, le=1024, description="square input size in pixels")
    epochs: int | None = Field(None, ge=1)
    steps_per_epoch: int | None = Field(None, ge=1, description="default: examples / global batch")
    batch_size: int | None = Field(None, ge=1, description="GLOBAL batch size (all replicas)")
    learning_rate: float | None = Field(None, gt=0, description="at base_batch_size; scaled linearly")
    base_batch_size: int | None = Field(None, ge=1)
    warmup_epochs: float | None = Field(None, ge=0)
    precision: Literal["auto", "float32", "mixed_float16", "mixed_bfloat16"] | None = None
    steps_per_execution: int | None = Field(None, ge=1, description="steps per host round trip")
    seed: int | None = None
    label_offset: int | None = Field(None, description="subtracted from labels (1 for 1-based ImageNet labels)")
    optimizer: Literal["sgd", "lamb"] | None = Field(None, description="sgd (Nesterov momentum) or lamb")
    label_smoothing: float | None = Field(None, ge=0, lt=1)
    extra_args: tuple[str, ...] = Field((), description="passed to the trainer verbatim")

    def to_args(self) -> list[str]:
        """The container args: `--kebab-case=value`, in field order, then extra_args."""
        args = []
        for name in type(self).model_fields:
            value = getattr(self, name)
            if name == "extra_args" or value is None:
                continue
            if isinstance(value, float) and value.is_integer():
                value = int(value)  # --warmup-epochs=5, not 5.0
            args.append(f"--{name.replace('_', '-')}={value}")
        return args + list(self.extra_args)


_NAME = r"^[a-z0-9-]{1,100}$"
_PROJECT = r"^([a-z][a-z0-9.-]*:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$"
_REGION = r"^[a-z]+-[a-z]+[0-9]+$"


class JobSpec(_Strict):
    """A resolved, validated training job. Build it with `load_spec`."""

    name: str = Field(pattern=_NAME, description="CustomJob display name: [a-z0-9-], 1..100 chars")
    project: str | None = Field(None, pattern=_PROJECT, description="Google Cloud project id")
    region: str = Field(pattern=_REGION, description="Vertex AI region, e.g. us-central1")
    hardware: Annotated[HardwareSpec, BeforeValidator(_hardware)] = Field(
        description="a preset name (vertex-trainer hardware) or {machine_type, accelerator_type, accelerator_count,"
        " tpu_topology}")
    replicas: int = Field(1, ge=1, le=256, description="machines: 1 -> workerpool0; N -> workerpool0 + N-1 workers")
    boot_disk: BootDisk = BootDisk()
    image: ImageSpec
    scheduling: Scheduling = Scheduling()
    output_dir: str | None = Field(None, description="gs://... (cloud) or a local path (local runs)")
    service_account: str | None = Field(
        None, pattern=r"^[a-z0-9-]+@[a-z0-9.-]+\.iam\.gserviceaccount\.com$|^[0-9]+-compute@developer\.gserviceaccount\.com$")
    network: str | None = Field(None, pattern=r"^projects/[0-9]+/global/networks/[a-z0-9-]+$")
    tensorboard: str | None = Field(None, pattern=r"^projects/[^/]+/locations/[a-z0-9-]+/tensorboards/[0-9]+$")
    encryption_key: str | None = Field(
        None, pattern=r"^projects/[^/]+/locations/[a-z0-9-]+/keyRings/[^/]+/cryptoKeys/[^/]+$")
    labels: dict[str, str] = Field(default_factory=dict, description="Vertex labels (lowercase, <= 63 chars)")
    env: dict[str, str] = Field(default_factory=dict, description="environment variables for every replica")
    trainer: TrainerArgs

    @field_validator("labels", mode="before")
    @classmethod
    def _label_values_as_text(cls, v):
        # YAML turns `tier: 1` into an int; Vertex labels are strings.
        if isinstance(v, dict):
            return {k: (str(x).lower() if isinstance(x, bool) else str(x)) if isinstance(x, (int, float, bool)) else x
                    for k, x in v.items()}
        return v

    @field_validator("env", mode="before")
    @classmethod
    def _env_values_as_text(cls, v):
        if isinstance(v, dict):
            return {k: (json.dumps(x) if isinstance(x, bool) else str(x)) if isinstance(x, (int, float, bool)) else x
                    for k, x in v.items()}
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> "JobSpec":
        h = self.hardware
        hw.check_hardware("hardware", h.machine_type, h.accelerator_type, h.accelerator_count, h.tpu_topology)
        s = self.scheduling
        hw.check_scheduling(hardware_field="hardware", machine_type=h.machine_type,
                            accelerator_type=h.accelerator_type, strategy=s.strategy, max_wait=s.max_wait,
                            timeout=s.timeout, restart=s.restart_on_worker_restart,
                            disable_retries=s.disable_retries, replicas=self.replicas)
        _check_labels(self.labels)
        _check_env(self.env)
        if self.boot_disk.type and self.boot_disk.type.startswith("pd-") and hw.boots_from_hyperdisk(h.machine_type):
            raise SpecError("boot_disk.type", f"{h.machine_type} boots only from hyperdisk-balanced",
                            value=self.boot_disk.type, hint="set boot_disk.type: hyperdisk-balanced or remove it")
        if self.tensorboard:
            tb_region = self.tensorboard.split("/")[3]
            if tb_region != self.region:
                raise SpecError("tensorboard", f"the TensorBoard instance is in {tb_region}, the job in {self.region}",
                                has_value=False, hint="use a TensorBoard instance in the job's region")
            if not self.service_account:
                raise SpecError("service_account", "Vertex AI requires a service account when tensorboard is set",
                                has_value=False, hint="set service_account: NAME@PROJECT.iam.gserviceaccount.com")
            if not self.output_dir:
                raise SpecError("output_dir", "tensorboard needs output_dir (the logs are written there)",
                                has_value=False, hint="set output_dir: gs://BUCKET/PATH")
        if self.encryption_key:
            key_region = self.encryption_key.split("/")[3]
            if key_region != self.region:
                raise SpecError("encryption_key", f"the key is in {key_region}, the job in {self.region}",
                                has_value=False, hint="Vertex AI needs a Cloud KMS key in the job's region")
        self._check_trainer()
        if self.runs_bundled_trainer:
            check_trainer_flags(self)
        # Image values can reach a Dockerfile or a shell: the packager's checks run at validate time too.
        from vertex_trainer.package import validate_image_values

        validate_image_values(self)
        return self

    def _check_trainer(self) -> None:
        t = self.trainer
        devices = self.total_devices
        if t.batch_size is not None and t.batch_size % devices:
            fix = (t.batch_size // devices + 1) * devices
            raise SpecError(
                "trainer.batch_size", f"the global batch {t.batch_size} does not split evenly over {devices} "
                f"replicas ({self.replicas} machine(s) x {self.hardware.devices} device(s))", has_value=False,
                hint=f"use a multiple of {devices}, e.g. {fix}")
        if t.steps_per_epoch and t.steps_per_execution and t.steps_per_epoch % t.steps_per_execution:
            raise SpecError(
                "trainer.steps_per_epoch", f"{t.steps_per_epoch} is not a multiple of steps_per_execution "
                f"{t.steps_per_execution} (Keras would run extra steps each epoch)", has_value=False,
                hint=f"use {t.steps_per_epoch - t.steps_per_epoch % t.steps_per_execution or t.steps_per_execution}")
        if t.warmup_epochs and t.epochs and t.warmup_epochs >= t.epochs:
            raise SpecError("trainer.warmup_epochs", f"{t.warmup_epochs:g} warmup epochs leave no training in "
                            f"{t.epochs} epochs", has_value=False, hint="use fewer warmup epochs than epochs")
        if t.precision == "mixed_float16" and self.hardware.accelerator and self.hardware.accelerator.kind == "tpu":
            raise SpecError("trainer.precision", "TPUs do not run float16", value="mixed_float16",
                            hint="use auto or mixed_bfloat16 on TPU")

    @property
    def runs_bundled_trainer(self) -> bool:
        """True when the cloud job runs the trainer shipped with vertex-trainer (not image.uri/context)."""
        return self.image.python_package or bool(self.image.repository and not self.image.context)

    @property
    def total_devices(self) -> int:
        return self.replicas * self.hardware.devices

    def to_dict(self) -> dict:
        """Plain data (durations in seconds), the canonical form hashed and saved beside artifacts."""
        return self.model_dump(mode="json", exclude_none=True)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=False)


_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")


def _check_labels(labels: dict[str, str]) -> None:
    if len(labels) > 62:  # Vertex allows 64; the tool adds two of its own
        raise SpecError("labels", f"{len(labels)} labels; at most 62 (Vertex allows 64, vertex-trainer adds 2)",
                        has_value=False, hint="remove some labels")
    for key, value in labels.items():
        if key in RESERVED_LABELS or key.startswith("goog"):
            raise SpecError(f"labels.{key}", "is reserved (set by vertex-trainer or Google)", has_value=False,
                            hint="use another key; the idempotency key comes from --idempotency-key")
        if not _LABEL_KEY.match(key):
            raise SpecError(f"labels.{key}", "invalid label key: 1-63 chars of a-z, 0-9, _ or -, starting with a "
                            "lowercase letter", has_value=False, hint=f"e.g. {_label_safe(key) or 'team'}")
        if not _LABEL_VALUE.match(value):
            raise SpecError(f"labels.{key}", "invalid label value: 0-63 chars of a-z, 0-9, _ or -", value=value,
                            hint=f"e.g. {_label_safe(value)!r}")


def _label_safe(text: str) -> str:
    out = re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-")[:63]
    return out


def _check_env(env: dict[str, str]) -> None:
    for key, value in env.items():
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise SpecError(f"env.{key}", "is not a valid environment variable name", has_value=False,
                            hint="use letters, digits and _; not starting with a digit")
        if key in VERTEX_ENV:
            raise SpecError(f"env.{key}", "is set by Vertex AI in every replica and cannot be overridden",
                            has_value=False, hint="remove it; use output_dir for the AIP_* directories")
        if "\x00" in value:
            raise SpecError(f"env.{key}", "contains a NUL byte", has_value=False, hint="remove it")


# ----------------------------------------------------------------------------------------------
# Loading: YAML -> overrides -> templates -> model


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML silently keeps the last)."""


def _construct_mapping(loader: _UniqueKeyLoader, node, deep=False):
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {seen[key] + 1})", key_node.start_mark)
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
# Keep timestamps and dates as text: they are never meant as datetimes in a spec.
_UniqueKeyLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def read_yaml(path: str | os.PathLike) -> dict:
    """Parse a spec file; syntax errors name the line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"spec file not found: {p}", hint="give the path of a YAML job spec, e.g. job_specs/quickstart-local.yaml") from None
    except (IsADirectoryError, UnicodeDecodeError, PermissionError) as e:
        raise UserError(f"cannot read spec file {p}: {e}") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise UserError(f"{p}:{where}: invalid YAML: {e.problem or e}") from None
    except yaml.YAMLError as e:
        raise UserError(f"{p}: invalid YAML: {e}") from None
    if data is None:
        raise UserError(f"{p}: the spec is empty", hint="see job_specs/ for examples")
    if not isinstance(data, dict):
        raise UserError(f"{p}: a spec is a mapping of keys (name:, region:, hardware:, ...), not a {type(data).__name__}")
    return data


def parse_assignments(items, flag: str) -> list[tuple[str, str]]:
    """'a.b=c' strings -> [(key, value)]; a missing '=' is a clear error."""
    out = []
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"{flag} {item!r}: expected KEY=VALUE", hint=f"e.g. {flag} trainer.batch_size=4096"
                            if flag == "--set" else f"e.g. {flag} user=alice")
        out.append((key.strip(), value))
    return out


def apply_set(data: dict, key: str, raw: str) -> None:
    """Apply one `--set dotted.key=value` to the raw spec mapping (value parsed as a YAML scalar)."""
    try:
        value = yaml.load(raw, Loader=_UniqueKeyLoader) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    parts = key.split(".")
    node = data
    for i, part in enumerate(parts[:-1]):
        path = ".".join(parts[: i + 1])
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif isinstance(child, str) and path == "hardware":
            child = node[part] = hw.resolve_preset(child)  # --set hardware.accelerator_count=4 on a preset
        elif not isinstance(child, dict):
            raise UserError(f"--set {key}: {path} is {child!r}, not a mapping",
                            hint=f"set {path} itself, e.g. --set {path}=...")
        node = child
    node[parts[-1]] = value


class _LazyGitSha:
    """`{{ git_sha }}`: computed only when a template uses it."""

    def __init__(self, cwd: Path):
        self.cwd = cwd

    def __str__(self) -> str:
        try:
            out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=self.cwd, capture_output=True,
                                 text=True, timeout=10, check=True)
        except (OSError, subprocess.SubprocessError):
            raise UserError("{{ git_sha }} is used but the spec is not in a git checkout with a commit",
                            hint="commit first, or pass --var and use {{ my_var }} instead") from None
        return out.stdout.strip()


def _render_templates(data: Any, context: dict, path: str = "") -> Any:
    import jinja2  # only specs that template pay for jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False)

    def walk(node, where):
        if isinstance(node, dict):
            return {k: walk(v, f"{where}.{k}" if where else str(k)) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, f"{where}[{i}]") for i, v in enumerate(node)]
        if isinstance(node, str) and ("{{" in node or "{%" in node):
            try:
                return env.from_string(node).render(**context)
            except jinja2.UndefinedError as e:
                names = ", ".join(sorted(k for k in context if k != "env"))
                raise SpecError(where, f"template {node!r}: {e.message}", has_value=False,
                                hint=f"known variables: {names}, env.NAME; add --var KEY=VALUE") from None
            except jinja2.TemplateError as e:
                raise SpecError(where, f"template {node!r}: {e}", has_value=False,
                                hint="templates look like {{ env.USER }} or {{ git_sha }}") from None
        return node

    return walk(data, path)


def _needs_templates(data: Any) -> bool:
    if isinstance(data, dict):
        return any(_needs_templates(v) for v in data.values())
    if isinstance(data, list):
        return any(_needs_templates(v) for v in data)
    return isinstance(data, str) and ("{{" in data or "{%" in data)


def _gcloud_properties() -> configparser.ConfigParser:
    """gcloud's active configuration, read from its file (running gcloud costs ~0.7 s)."""
    cfg = configparser.ConfigParser()
    root = Path(os.environ.get("CLOUDSDK_CONFIG") or Path.home() / ".config" / "gcloud")
    try:
        active = (root / "active_config").read_text().strip() or "default"
    except OSError:
        active = "default"
    try:
        cfg.read(root / "configurations" / f"config_{active}")
    except (OSError, configparser.Error):
        pass
    return cfg


def default_project() -> str | None:
    """$GOOGLE_CLOUD_PROJECT, $CLOUDSDK_CORE_PROJECT, then gcloud's configured project."""
    for var in ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"):
        if os.environ.get(var):
            return os.environ[var]
    return _gcloud_properties().get("core", "project", fallback=None) or None


def default_region() -> str | None:
    """$CLOUDSDK_AI_REGION, then gcloud's ai/region."""
    if os.environ.get("CLOUDSDK_AI_REGION"):
        return os.environ["CLOUDSDK_AI_REGION"]
    return _gcloud_properties().get("ai", "region", fallback=None) or None


def load_spec(path: str | os.PathLike, sets=(), vars: dict[str, str] | None = None,
              project: str | None = None, region: str | None = None) -> JobSpec:
    """Load, override, template and validate a job spec.

    `sets` are `"dotted.key=value"` strings (or (key, value) pairs); `vars` feed `{{ var }}`;
    `project`/`region` flags win over the file. Raises UserError/SpecError (exit 2).
    """
    data = read_yaml(path)
    return build_spec(data, sets=sets, vars=vars, project=project, region=region, base_dir=Path(path).parent)


def build_spec(data: dict, sets=(), vars: dict[str, str] | None = None, project: str | None = None,
               region: str | None = None, base_dir: Path | None = None) -> JobSpec:
    """The same as load_spec, from an already-parsed mapping."""
    data = json.loads(json.dumps(data, default=str))  # deep copy; never mutate the caller's mapping
    pairs = [s if isinstance(s, tuple) else parse_assignments([s], "--set")[0] for s in sets]
    for key, value in pairs:
        apply_set(data, key, value)
    if project:
        data["project"] = project
    if region:
        data["region"] = region

    if _needs_templates(data):
        raw_name = data.get("name")
        context = {
            "env": dict(os.environ),
            "git_sha": _LazyGitSha(base_dir or Path.cwd()),
            "timestamp": _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S"),
            **(vars or {}),
        }
        if isinstance(raw_name, str):
            context["name"] = _render_templates(raw_name, context, "name")
        data = _render_templates(data, context)

    if not data.get("project"):
        found = default_project()
        if found:
            data["project"] = found
    if not data.get("region"):
        found = default_region()
        if found:
            data["region"] = found
        else:
            raise SpecError("region", "is required", has_value=False,
                            hint="add `region: us-central1` to the spec, or pass --region")
    try:
        return JobSpec.model_validate(data)
    except ValidationError as e:
        raise _spec_error(e, data) from None


def _dotted(loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _model_at(loc) -> type[BaseModel] | None:
    """The pydantic model that owns the mapping at `loc` (for did-you-mean on unknown keys)."""
    model: Any = JobSpec
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            return None
        ann = field.annotation
        candidates = [ann, *getattr(ann, "__args__", ())]
        nxt = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if nxt is None:
            return None
        model = nxt
    return model


def _spec_error(exc: ValidationError, data: dict) -> SpecError:
    errors = exc.errors(include_url=False)
    err = errors[0]
    loc = tuple(err["loc"])
    field = _dotted(loc)
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    kind = err["type"]
    if kind == "extra_forbidden":
        model = _model_at(loc[:-1])
        allowed = list(model.model_fields) if model else []
        near = hw.suggest(loc[-1], allowed)
        hint = (f"did you mean '{near}'? " if near else "") + ("allowed keys: " + ", ".join(allowed) if allowed else "")
        return SpecError(field, f"unknown key{more}", has_value=False, hint=hint)
    if kind == "missing":
        return SpecError(field, f"is required{more}", has_value=False,
                         hint=_field_doc(loc) or "see `vertex-trainer schema` for every field")
    msg = err["msg"].removeprefix("Value error, ")
    hint = None
    if kind == "literal_error":
        expected = re.findall(r"'([^']*)'", err.get("ctx", {}).get("expected", ""))
        near = hw.suggest(err.get("input"), expected)
        hint = f"did you mean '{near}'?" if near else None
    elif kind == "string_pattern_mismatch":
        msg = "has an invalid format"
        hint = _field_doc(loc)
    elif kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than", "int_parsing",
                  "float_parsing", "bool_parsing", "int_from_float"):
        hint = _field_doc(loc)
    return SpecError(field, msg + more, value=err.get("input"), hint=hint)


def _field_doc(loc) -> str | None:
    model = _model_at(loc[:-1])
    if model is None or not isinstance(loc[-1], str):
        return None
    f = model.model_fields.get(loc[-1])
    return f.description if f else None


def spec_hash(spec: JobSpec) -> str:
    """A label-safe hash of the resolved spec (same spec -> same hash)."""
    canonical = json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:20]


def json_schema() -> dict:
    """JSON Schema of the spec file (for editors): hardware may be a preset name."""
    schema = JobSpec.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "vertex-trainer job spec"
    props = schema["properties"]
    hw_schema = props["hardware"]
    props["hardware"] = {
        "description": hw_schema.get("description", ""),
        "anyOf": [{"type": "string", "enum": sorted(hw.PRESETS)},
                  {k: v for k, v in hw_schema.items() if k != "description"}],
    }
    return schema


def check_trainer_flags(spec: JobSpec) -> None:
    """Parse the job's trainer args with the bundled trainer's own parser (no TensorFlow import).

    A misspelt model or extra flag then fails here with exit 2, not after an image build and a
    queue wait on Vertex AI. Skipped when the trainer package is not installed beside the client.
    """
    try:
        from trainer.config import UsageError as TrainerUsage, parse_flags
    except ImportError:
        return
    dirs = {"AIP_MODEL_DIR": "/model/", "AIP_CHECKPOINT_DIR": "/checkpoints/", "AIP_TENSORBOARD_LOG_DIR": "/logs/"}
    try:
        parse_flags(spec.trainer.to_args(), environ=dirs)
    except TrainerUsage as e:
        message = str(e)
        field = next((f"trainer.{name}" for name in TrainerArgs.model_fields
                      if name != "extra_args" and f"--{name.replace('_', '-')}" in message.split(":")[0]), None)
        if field is None:
            field = "trainer.extra_args" if spec.trainer.extra_args else "trainer"
        raise SpecError(field, f"the bundled trainer refuses it: {message}", has_value=False,
                        hint="see `python -m trainer.task --help` for its flags and models") from None


def cloud_problems(spec: JobSpec) -> None:
    """Raise SpecError for values that only work locally (checked before a cloud submit)."""
    if not spec.project:
        raise SpecError("project", "is required to submit to Vertex AI", has_value=False,
                        hint="add `project:` to the spec, pass --project, or set GOOGLE_CLOUD_PROJECT")
    if spec.output_dir and not spec.output_dir.startswith("gs://"):
        raise SpecError("output_dir", "must be a gs:// path for a cloud job (local paths work with --local)",
                        value=spec.output_dir, hint="e.g. output_dir: gs://my-bucket/runs/{{ name }}")
    for field in ("train_data", "eval_data"):
        value = getattr(spec.trainer, field)
        if value and not value.startswith(("gs://", "/gcs/")):
            raise SpecError(f"trainer.{field}", "must be gs:// or /gcs/ for a cloud job (local paths work with "
                            "--local)", value=value, hint="upload the TFRecords to Cloud Storage first")
