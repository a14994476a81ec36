"""The job spec as frozen, strict pydantic models (docs/contract.md section 1).

Each model checks only its own fields; the rules that span several fields live in rules.py and
run from one `JobSpec` validator, so every way of building a JobSpec runs them. Build one with
`vertex_trainer.spec.load_spec` / `build_spec` (they add templates, `--set` and readable errors).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BeforeValidator,
    Discriminator,
    Field,
    Tag,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from vertex_trainer import hardware as hw
from vertex_trainer.durations import parse_duration
from vertex_trainer.errors import SpecError
from vertex_trainer.spec import rules
from vertex_trainer.spec.base import AsIs, Strict, as_problem, problem
from vertex_trainer.spec.deploy_block import DeploySpec
from vertex_trainer.spec.factory import factory_rules
from vertex_trainer.spec.images import Builder, VariantName
from vertex_trainer.spec.scaling import ScalingSpec
from vertex_trainer.spec.scaling import check as scaling_rules
from vertex_trainer.spec.trainer import TrainerArgs
from vertex_trainer.spec.tune import TuneSpec


def _duration(value: Any) -> Any:
    return None if value is None else parse_duration(value)


Duration = Annotated[
    int,
    BeforeValidator(_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": r"^(\d+d)?(\d+h)?(\d+m)?(\d+s)?$|^\d+$"},
            ],
            "description": "seconds, or 90s, 30m, 4h, 2d, 1h30m",
        }
    ),
]


class HardwareSpec(Strict):
    """One machine: every replica of the job runs on the same shape."""

    machine_type: str = Field(description="Compute Engine machine type, e.g. a3-highgpu-8g")
    accelerator_type: str | None = Field(None, description="AcceleratorType enum name, e.g. NVIDIA_H100_80GB")
    accelerator_count: int = Field(0, ge=0, description="accelerators per machine")
    tpu_topology: str | None = Field(
        None, pattern=r"^\d+x\d+(x\d+)?$", description="TPU v5e topology, e.g. 2x2"
    )

    @property
    def preset(self) -> str | None:
        return hw.preset_for(
            self.machine_type, self.accelerator_type, self.accelerator_count, self.tpu_topology
        )

    @property
    def accelerator(self) -> hw.Accelerator | None:
        return hw.accelerator_of(self.machine_type, self.accelerator_type)

    @property
    def devices(self) -> int:
        """Data-parallel replicas one machine contributes (GPUs, TPU chips/cores, or 1)."""
        return hw.devices_per_machine(
            self.machine_type, self.accelerator_type, self.accelerator_count, self.tpu_topology
        )

    def describe(self) -> str:
        acc = self.accelerator
        if acc is None:
            return self.machine_type
        count = self.accelerator_count or self.devices
        topo = f", topology {self.tpu_topology}" if self.tpu_topology else ""
        return f"{self.machine_type} ({count} x {acc.name}{topo})"


def _hardware(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return hw.resolve_preset(value.strip())
        except SpecError as e:
            raise as_problem(e, "hardware") from None
    return value


class BootDisk(Strict):
    type: Literal["pd-ssd", "pd-standard", "hyperdisk-balanced"] | None = Field(
        None, description="boot disk type; default pd-ssd (hyperdisk-balanced on a3-ultragpu / a4 machines)"
    )
    size_gb: int = Field(100, ge=100, le=64000, description="boot disk size in GB")


class ImageSpec(Strict):
    """Which code runs: an existing image, an image built from the trainer, or a Python package."""

    uri: str | None = Field(None, description="use this container image as is (no build)")
    repository: str | None = Field(
        None,
        description="Artifact Registry repository to build into; the tag is the build context's content hash",
    )
    builder: Builder = Field("cloud-build", description="how to build the image: cloud-build or docker")
    context: str | None = Field(
        None, description="a directory with its own Dockerfile; default: the bundled trainer"
    )
    variant: Literal["auto", VariantName] = Field(
        "auto", description="which Dockerfile template: auto follows the hardware"
    )
    base_image: str | None = Field(
        None,
        description="override the variant's pinned base image; with image.code, auto (the default) is "
        "the prebuilt Vertex AI TensorFlow training image of the variant",
    )
    base_image_digest: str | None = Field(
        None, pattern=r"^sha256:[0-9a-f]{64}$", description="pin the base image by digest"
    )
    pip_packages: tuple[str, ...] = Field((), description="extra pip requirements baked into the image")
    python_package: bool = Field(
        False, description="no Docker: build an sdist of the trainer and run it on a prebuilt Vertex image"
    )
    executor_image: str | None = Field(
        None, description="prebuilt Vertex AI training image for python_package"
    )
    staging_bucket: str | None = Field(
        None,
        pattern=r"^gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9](/[A-Za-z0-9._/-]*)?$",
        description="gs://bucket/prefix for build contexts and packages; default: <output_dir>/staging",
    )
    code: str | None = Field(
        None,
        description="your own training code: a local directory (relative to the current directory) "
        "run with image.script or image.module instead of the bundled trainer",
    )
    script: str | None = Field(
        None, description="with image.code: run `python SCRIPT ARGS` (a .py path inside image.code)"
    )
    module: str | None = Field(
        None, description="with image.code: run `python -m MODULE ARGS` (a dotted module inside image.code)"
    )
    requirements: tuple[str, ...] = Field(
        (),
        description="with image.code: pip requirements of your code (plus image.code/requirements.txt "
        "when present)",
    )
    include_secrets: tuple[str, ...] = Field(
        (),
        description="files of image.code or image.context that look like credentials (left out by "
        "default, docs/packager.md) to package anyway, each named by its path or a glob",
    )

    @model_validator(mode="after")
    def _one_source(self) -> ImageSpec:
        given = [k for k in ("uri", "repository") if getattr(self, k)] + (
            ["python_package"] if self.python_package else []
        )
        # image.code with none of them: a spec for --local only (spec.rules.cloud_problems refuses it)
        if len(given) > 1 or (not given and not self.code):
            what = "none is set" if not given else f"{' and '.join(given)} are set"
            raise problem(
                f"set exactly one of uri, repository or python_package: true ({what})",
                hint="uri: an existing image; repository: build the trainer; python_package: no Docker",
            )
        if self.executor_image and not self.python_package:
            raise problem(
                "only applies with python_package: true",
                sub="executor_image",
                hint="remove executor_image or set python_package: true",
            )
        self._code_fields()
        return self

    def _code_fields(self) -> None:
        """image.code and its companions (script, module, requirements) go together."""
        if not self.code:
            for name in ("script", "module", "requirements"):
                if getattr(self, name):
                    raise problem(
                        "only applies with image.code (your own code's directory)",
                        sub=name,
                        hint=f"add image.code: DIR, or remove image.{name}",
                    )
            return
        if self.script and self.module:  # neither: a model factory (spec/factory.py) or exit 2
            raise problem(
                "needs one of image.script or image.module (both are set)",
                sub="code",
                hint="image.script: task.py runs `python task.py`; image.module: trainer.task "
                "runs `python -m trainer.task`",
            )
        for name, why in (
            ("uri", "an existing image already holds its code"),
            ("context", "a directory with its own Dockerfile decides what runs"),
            ("pip_packages", "they belong to the bundled trainer's image; use image.requirements"),
        ):
            if getattr(self, name):
                raise problem(
                    f"does not go with image.code: {why}",
                    sub=name,
                    hint=f"remove image.{name}, or drop image.code",
                )

    @property
    def runs_code(self) -> bool:
        """True for a script job: image.code run with image.script or image.module."""
        return bool(self.code and (self.script or self.module))

    @property
    def builds(self) -> bool:
        """True when the code must be packaged (built or uploaded) before a cloud run."""
        return bool(self.repository or self.python_package)


Strategy = Literal["standard", "spot", "flex-start"]


def _no_fallback(value: Any) -> Any:
    # `fallback: []` (or null) is no fallback: None keeps the spec hash of a spec without one;
    # `fallback: spot` (--set scheduling.fallback=spot) is a list of one.
    if isinstance(value, str):
        return (value,)
    return None if value is None or (isinstance(value, (list, tuple)) and not value) else value


# A Compute Engine reservation: its resource name (or a block of it), zonal.
RESERVATION = (
    r"^any$|^projects/[a-z0-9.:-]+/zones/[a-z]+-[a-z]+[0-9]+-[a-z]/reservations/[a-z0-9-]+"
    r"(/reservationBlocks/[a-z0-9-]+(/reservationSubBlocks/[a-z0-9-]+)?)?$"
)


class FallbackAttempt(Strict):
    """One more attempt of the capacity plan (docs/contract.md section 11): every field it leaves
    out is the spec's (its strategy, region, hardware and reservation)."""

    strategy: Strategy | None = Field(
        None, description="standard, spot or flex-start (default: scheduling.strategy)"
    )
    region: str | None = Field(
        None,
        pattern=r"^[a-z]+-[a-z]+[0-9]+$",
        description="the region of this attempt's job (default: the spec's region)",
    )
    hardware: Annotated[HardwareSpec | None, BeforeValidator(_hardware)] = Field(
        None, description="a preset name or {machine_type, ...} (default: the spec's hardware)"
    )
    reservation: str | None = Field(
        None,
        pattern=RESERVATION[:-1] + "|^none$",
        description="projects/P/zones/Z/reservations/R, any, or none (default: scheduling.reservation)",
    )


# A fallback entry is a strategy name or a mapping; the tag picks the branch, so a bad entry
# gets one message (the branch it meant), not one per branch; messages.py drops "~" tags from paths.
FallbackEntry = Annotated[
    Annotated[Strategy, Tag("~name")] | Annotated[FallbackAttempt, Tag("~entry")],
    Discriminator(lambda v: "~entry" if isinstance(v, (dict, FallbackAttempt)) else "~name"),
]


class Scheduling(Strict):
    strategy: Strategy = Field(
        "standard",
        description="standard, spot (preemptible, cheaper) or flex-start (Dynamic Workload Scheduler)",
    )
    fallback: Annotated[tuple[FallbackEntry, ...] | None, BeforeValidator(_no_fallback)] = Field(
        None,
        description="attempts tried in order when capacity or quota refuses the one before "
        "(a create refused with RESOURCE_EXHAUSTED, or a job that ends FAILED with code 8): a strategy "
        "name, or {strategy, region, hardware, reservation}, e.g. [spot, {strategy: standard, region: "
        "europe-west4}]; each attempt is its own job under the same idempotency key",
    )
    reservation: str | None = Field(
        None,
        pattern=RESERVATION,
        description="consume a Compute Engine reservation: projects/P/zones/Z/reservations/R (its zone in "
        "the job's region), or any; standard strategy only",
    )
    allow_remote_data: bool | None = Field(
        None, description="let an attempt run in a region the data's bucket does not cover (default: exit 2)"
    )
    max_wait: Duration | None = Field(
        None, description="flex-start only: how long to wait for capacity (0 = forever)"
    )
    timeout: Duration | None = Field(
        None, description="maximum run time (default 7d); flex-start requires <= 7d"
    )
    restart_on_worker_restart: bool = Field(False, description="restart the whole job when a worker restarts")
    disable_retries: bool = Field(False, description="fail instead of retrying on internal errors")
    max_cost: float | None = Field(
        None,
        gt=0,
        description="USD: a plan whose worst case (timeout x hourly list price, every attempt) "
        "costs more is refused before anything is sent (vertex-trainer cost SPEC shows it)",
    )

    @field_validator("timeout")
    @classmethod
    def _positive(cls, v: int | None) -> int | None:
        if v is not None and v <= 0:
            raise ValueError("timeout must be more than 0 seconds: e.g. 4h or 3d, or leave it out (7 days)")
        return v


_NAME = r"^[a-z0-9-]{1,100}$"
_PROJECT = r"^([a-z][a-z0-9.-]*:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$"
_REGION = r"^[a-z]+-[a-z]+[0-9]+$"


def _as_text(value: Any, dump: Callable[[Any], str]) -> Any:
    # YAML turns `tier: 1` into an int and `debug: true` into a bool; labels and env are text.
    if isinstance(value, dict):
        return {k: dump(x) if isinstance(x, (int, float, bool)) else x for k, x in value.items()}
    return value


class JobSpec(Strict):
    """A resolved, validated training job. Build it with `load_spec` or `build_spec`."""

    name: str = Field(pattern=_NAME, description="CustomJob display name: [a-z0-9-], 1..100 chars")
    project: str | None = Field(None, pattern=_PROJECT, description="Google Cloud project id")
    region: str | None = Field(
        None,
        pattern=_REGION,
        description="Vertex AI region, e.g. us-central1 (a cloud job needs one; --local does not)",
    )
    hardware: Annotated[HardwareSpec, BeforeValidator(_hardware)] = Field(
        description="a preset name (vertex-trainer hardware) or {machine_type, accelerator_type, "
        "accelerator_count, tpu_topology}"
    )
    replicas: int = Field(
        1, ge=1, le=256, description="machines: 1 -> workerpool0; N -> workerpool0 + N-1 workers"
    )
    scaling: ScalingSpec | None = Field(
        None, description="{reduction_server: auto | N}: Reduction Server for GPU jobs on 2+ machines"
    )
    boot_disk: BootDisk = Field(
        BootDisk(), description="{type: pd-ssd | pd-standard | hyperdisk-balanced, size_gb: 100..64000}"
    )
    image: ImageSpec | None = Field(
        None,
        description="exactly one of uri (an image), repository (build the trainer) "
        "or python_package: true; a cloud job needs one, --local does not (image.code neither)",
    )
    scheduling: Scheduling = Field(
        Scheduling(),
        description="{strategy: standard | spot | flex-start, fallback: [...], max_wait, "
        "timeout, restart_on_worker_restart, disable_retries}",
    )
    output_dir: str | None = Field(
        None,
        description="gs://BUCKET/PATH: each submission runs in its own folder below it, "
        "<output_dir>/<name>-<key or time>/ (model/, checkpoints/, logs/); a local path only with --local",
    )
    fixed_output_dir: bool = Field(
        False,
        description="true: every submission writes to output_dir itself, not to a folder of its own "
        "(a second run then overwrites the first one's model, checkpoints and metrics)",
    )
    service_account: str | None = Field(
        None,
        pattern=r"^[a-z0-9-]+@[a-z0-9.-]+\.iam\.gserviceaccount\.com$|^[0-9]+-compute@developer\.gserviceaccount\.com$",
        description="service account the job runs as, NAME@PROJECT.iam.gserviceaccount.com",
    )
    network: str | None = Field(
        None,
        pattern=r"^projects/[0-9]+/global/networks/[a-z0-9-]+$",
        description="VPC network: projects/PROJECT_NUMBER/global/networks/NAME",
    )
    persistent_resource: str | None = Field(
        None,
        pattern=r"^[a-z][a-z0-9-]{0,62}$|^projects/[^/]+/locations/[a-z0-9-]+/persistentResources/[a-z][a-z0-9-]{0,62}$",
        description="run on this persistent resource (an id, or "
        "projects/P/locations/R/persistentResources/ID) instead of new VMs (vertex-trainer resources create)",
    )
    enable_web_access: bool | None = Field(
        None, description="an interactive shell on each replica while it runs (vertex-trainer shell JOB)"
    )
    enable_dashboard_access: bool | None = Field(
        None, description="the training container's dashboard on the chief, at its web access URI"
    )
    tensorboard: str | None = Field(
        None,
        pattern=r"^auto$|^projects/[^/]+/locations/[a-z0-9-]+/tensorboards/[0-9]+$",
        description="projects/P/locations/R/tensorboards/ID, or auto (found or made); needs service_account",
    )
    encryption_key: str | None = Field(
        None,
        pattern=r"^projects/[^/]+/locations/[a-z0-9-]+/keyRings/[^/]+/cryptoKeys/[^/]+$",
        description="Cloud KMS key in the job's region: projects/P/locations/R/keyRings/K/cryptoKeys/C",
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Vertex labels (lowercase, <= 63 chars)")
    env: dict[str, AsIs] = Field(default_factory=dict, description="environment variables for every replica")
    trainer: TrainerArgs | None = Field(
        None,
        description="the bundled trainer's flags (--kebab-case=value; unset = trainer default); "
        "required unless the job runs your own code (image.code) or image (image.uri, image.context)",
    )
    args: tuple[AsIs, ...] = Field(
        (),
        description="the arguments of your own code (image.code) or image (image.uri, image.context): "
        "containerSpec.args / pythonPackageSpec.args",
    )
    command: tuple[AsIs, ...] = Field(
        (),
        description="image.uri / image.context only: replaces the image's ENTRYPOINT (containerSpec.command)",
    )
    deploy: DeploySpec | None = Field(
        None,
        description="register the model and serve it on an Endpoint "
        "once the job succeeded (submit --wait --deploy, deploy)",
    )
    tune: TuneSpec | None = Field(
        None,
        description="hyperparameter tuning: submit creates a Vertex AI "
        "HyperparameterTuningJob whose trials run this job with other trainer flags "
        "(or, without trainer:, other values of your code's own --NAME=VALUE arguments)",
    )

    @field_validator("labels", mode="before")
    @classmethod
    def _label_values_as_text(cls, v: Any) -> Any:
        return _as_text(v, lambda x: str(x).lower() if isinstance(x, bool) else str(x))

    @field_validator("env", mode="before")
    @classmethod
    def _env_values_as_text(cls, v: Any) -> Any:
        return _as_text(v, lambda x: json.dumps(x) if isinstance(x, bool) else str(x))

    @model_validator(mode="after")
    def _rules(self) -> JobSpec:
        # First what the job runs (the rules below read trainer: when the job has one).
        _what_runs(self)
        rules.check(self)  # the cross-field rules; raises SpecError / SpecProblems (exit 2)
        scaling_rules(self)  # scaling.reduction_server where it can help (spec/scaling.py)
        return self

    @property
    def runs_bundled_trainer(self) -> bool:
        """True when the cloud job runs the trainer shipped with vertex-trainer (not image.uri/
        context, not your own code from image.code)."""
        if self.image is None:  # a local-only spec: the installed trainer runs
            return True
        if self.image.runs_code:
            return False
        return self.image.python_package or bool(self.image.repository and not self.image.context)

    @property
    def is_script_job(self) -> bool:
        """True when the job runs your own code (image.code with image.script or image.module)."""
        return self.image is not None and self.image.runs_code

    @property
    def total_devices(self) -> int:
        return self.replicas * self.hardware.devices

    def to_dict(self) -> dict[str, Any]:
        """Plain data (durations in seconds), the canonical form hashed and saved beside artifacts."""
        data = self.model_dump(mode="json", exclude_none=True)
        # Fields added for script jobs (issue 32) are left out while empty, so a spec that does
        # not use them keeps the hash (and the vertex-trainer-spec label) it had before.
        for key in ("args", "command"):
            if not data.get(key):
                data.pop(key, None)
        for key in ("requirements", "include_secrets"):  # (include_secrets: issue 41, the same way)
            if "image" in data and not data["image"].get(key):
                data["image"].pop(key, None)
        return data

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=False)


def _what_runs(spec: JobSpec) -> None:
    """trainer:, args: and command: against what the job runs (docs/contract.md section 14).

    Raises:
        SpecError: the one field that does not fit, its value and the fix (exit 2).
    """
    factory_rules(spec)  # image.code and trainer.model: package.module:function
    if spec.is_script_job:
        if spec.trainer is not None:
            raise SpecError(
                "trainer",
                "is not used by a script job: image.code runs your own code "
                f"({_entry(spec)}), not the bundled trainer",
                value=spec.trainer.model_dump(exclude_none=True, exclude_defaults=True) or None,
                hint="remove trainer: and pass your code's arguments in args: [...]",
            )
        if spec.command:
            raise SpecError(
                "command",
                f"does not apply to a script job: it runs {_entry(spec)}",
                value=list(spec.command),
                hint="remove command:, or change image.script / image.module",
            )
        return  # tune: varies the code's own arguments (spec/tune.py)
    if spec.runs_bundled_trainer:
        if spec.trainer is None:
            raise SpecError(
                "trainer",
                "is required: the job runs the bundled trainer",
                has_value=False,
                hint="add trainer: {train_data: ..., num_classes: ...}; or run your own code "
                "with image.code and image.script (or image.module)",
            )
        for name, given in (("args", spec.args), ("command", spec.command)):
            if given:
                raise SpecError(
                    name,
                    "only applies to your own code (image.code) or image (image.uri, image.context)",
                    value=list(given),
                    hint="the bundled trainer takes trainer: fields (trainer.extra_args for any other flag)",
                )
        return
    # image.uri / image.context: the image's own code, given trainer: flags or args:.
    if spec.trainer is not None and spec.args:
        raise SpecError(
            "args",
            "and trainer: are both set; an image takes one argument list",
            value=list(spec.args),
            hint="keep trainer: (the bundled trainer's flags) or args: (the image's own arguments)",
        )


def _entry(spec: JobSpec) -> str:
    image = spec.image
    assert image is not None
    return f"python {image.script}" if image.script else f"python -m {image.module}"


def spec_hash(spec: JobSpec) -> str:
    """A label-safe hash of the resolved spec (same spec -> same hash)."""
    canonical = json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:20]


def json_schema() -> dict[str, Any]:
    """JSON Schema of the spec FILE (for editors): hardware may be a preset name, and any value
    may be a jinja2 template (`{{ timestamp }}`), which is resolved when the spec is loaded."""
    schema = JobSpec.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "vertex-trainer job spec"
    props = schema["properties"]
    hw_schema = props["hardware"]
    props["hardware"] = {
        "description": hw_schema.get("description", ""),
        "anyOf": [
            {"type": "string", "enum": sorted(hw.PRESETS)},
            {k: v for k, v in hw_schema.items() if k != "description"},
        ],
    }
    out: dict[str, Any] = _templates_allowed(schema)
    return out


_TEMPLATE = {
    "type": "string",
    "pattern": r"\{\{|\{%",
    "description": "a jinja2 template, resolved when the spec is loaded",
}
_LEAF_TYPES = {"string", "integer", "number", "boolean"}


def _templates_allowed(node: Any) -> Any:
    """Let every scalar value (a pattern, an enum, a number) also be a template string."""
    if isinstance(node, list):
        return [_templates_allowed(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {
        k: (v if k in ("properties", "$defs", "definitions") else _templates_allowed(v))
        for k, v in node.items()
    }
    for key in ("properties", "$defs", "definitions"):
        if key in node:
            out[key] = {name: _templates_allowed(sub) for name, sub in node[key].items()}
    leaf = out.get("type") in _LEAF_TYPES or ("enum" in out and "type" not in out) or "const" in out
    if leaf:
        described = {k: v for k, v in out.items() if k in ("description", "title", "default")}
        rule = {k: v for k, v in out.items() if k not in described}
        return {**described, "anyOf": [rule, _TEMPLATE]}
    return out
