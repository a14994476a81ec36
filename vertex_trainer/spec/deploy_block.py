"""The `deploy:` block (docs/contract.md section 5): where and how the trained model is served.

The model checks its own fields; `deploy_rules(spec)` checks what spans the spec (the endpoint's
project and region, the serving image against how the job's code is packaged), run with the other
cross-field rules in rules.py.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from vertex_trainer import hardware as hw
from vertex_trainer.errors import SpecError
from vertex_trainer.spec.base import Strict, problem
from vertex_trainer.spec.images import validate_image_reference
from vertex_trainer.suggest import suggest

if TYPE_CHECKING:  # model.py imports this module (DeploySpec): named for the type checker
    from vertex_trainer.spec.model import JobSpec

# Machine families Vertex AI online prediction offers (docs: "Configure compute resources for
# inference"); GPUs attach to n1, a2, a3 and g2 machines.
SERVING_FAMILIES = ("n1", "n2", "n2d", "e2", "c2", "c2d", "c3", "a2", "a3", "g2")
SERVING_GPUS = (
    "NVIDIA_TESLA_T4",
    "NVIDIA_TESLA_V100",
    "NVIDIA_TESLA_P4",
    "NVIDIA_TESLA_P100",
    "NVIDIA_TESLA_A100",
    "NVIDIA_A100_80GB",
    "NVIDIA_L4",
    "NVIDIA_H100_80GB",
)
_MACHINE = re.compile(r"^(?P<family>[a-z][a-z0-9]*)-[a-z0-9-]+$")
_ENDPOINT_NAME = re.compile(r"^projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/endpoints/[^/]+$")


class DeploySpec(Strict):
    """Register the trained model and serve it on a Vertex AI Endpoint."""

    model: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        description="Model Registry display name (default: the spec's name); "
        "each deploy of a new job adds a version under it",
    )
    endpoint: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        description="endpoint display name (created if missing) or "
        "projects/P/locations/R/endpoints/ID (default: the spec's name)",
    )
    machine_type: str = Field(
        "n1-standard-4", description="serving machine, e.g. n1-standard-4, g2-standard-8"
    )
    accelerator_type: str | None = Field(None, description="GPU for serving, e.g. NVIDIA_TESLA_T4")
    accelerator_count: int = Field(0, ge=0, le=8, description="GPUs per serving machine")
    min_replicas: int = Field(1, ge=1, le=1000, description="serving machines at least")
    max_replicas: int | None = Field(
        None, ge=1, le=1000, description="serving machines at most (default: min_replicas)"
    )
    traffic: int = Field(
        100,
        ge=0,
        le=100,
        description="percent of the endpoint's traffic for the new "
        "version; the versions already serving share the rest (at 100, the default, they are "
        "undeployed once it serves, unless keep_previous)",
    )
    keep_previous: bool = Field(
        False,
        description="keep the other deployed models on the endpoint when the new version takes "
        "all the traffic (default: undeploy them once it serves, so their nodes stop billing)",
    )
    serving_image: str = Field(
        "auto",
        description="auto: the job's own image running `python -m "
        "trainer.serve` (docs/serving.md); or a serving container URI",
    )
    timeout: int = Field(
        3600,
        ge=60,
        le=6 * 3600,
        description="seconds to wait for the upload and the deployment (deploys take 10-30 minutes)",
    )

    @model_validator(mode="after")
    def _own_fields(self) -> DeploySpec:
        m = _MACHINE.match(self.machine_type)
        if not m or m["family"] not in SERVING_FAMILIES:
            raise problem(
                f"{self.machine_type!r} is not a machine type Vertex AI serves on",
                sub="machine_type",
                hint="families: " + ", ".join(f"{f}-*" for f in SERVING_FAMILIES) + "; e.g. n1-standard-4",
            )
        if self.accelerator_type and self.accelerator_type not in SERVING_GPUS:
            near = suggest(self.accelerator_type, SERVING_GPUS)
            raise problem(
                f"{self.accelerator_type!r} is not a GPU Vertex AI serves with",
                sub="accelerator_type",
                hint=(f"did you mean '{near}'? " if near else "") + "allowed: " + ", ".join(SERVING_GPUS),
            )
        if self.accelerator_type and not self.accelerator_count:
            raise problem(
                f"must be at least 1 when accelerator_type is {self.accelerator_type}",
                sub="accelerator_count",
                hint="e.g. accelerator_count: 1",
            )
        if self.accelerator_count and not self.accelerator_type:
            raise problem(
                f"accelerator_count is {self.accelerator_count} but no accelerator_type is set",
                sub="accelerator_type",
                hint="e.g. accelerator_type: NVIDIA_TESLA_T4",
            )
        if self.accelerator_type and hw.machine(self.machine_type) is not None:
            try:  # GPU machines: the same machine <-> GPU <-> count pairings as training
                hw.check_hardware(
                    "deploy", self.machine_type, self.accelerator_type, self.accelerator_count, None
                )
            except SpecError as e:
                raise problem(
                    e.message.split(": ", 1)[-1],
                    sub=e.field.removeprefix("deploy.") if e.field.startswith("deploy.") else "",
                    hint=e.hint,
                ) from None
        elif self.accelerator_type:
            raise problem(
                f"{self.machine_type} takes no GPU",
                sub="machine_type",
                hint="GPUs attach to n1-*, a2-*, a3-* and g2-* machines, e.g. n1-standard-4 "
                "with NVIDIA_TESLA_T4",
            )
        if self.max_replicas is not None and self.max_replicas < self.min_replicas:
            raise problem(
                f"max_replicas {self.max_replicas} is less than min_replicas {self.min_replicas}",
                sub="max_replicas",
                hint=f"use max_replicas >= {self.min_replicas}",
            )
        if self.serving_image != "auto":
            try:
                validate_image_reference("deploy.serving_image", self.serving_image)
            except SpecError as e:
                raise problem(e.message.split(": ", 1)[-1], sub="serving_image", hint=e.hint) from None
        return self


def deploy_rules(spec: JobSpec) -> None:
    """Rules between `deploy:` and the rest of the spec (raise SpecError)."""
    d = spec.deploy
    if d is None:
        return
    if d.endpoint and d.endpoint.startswith("projects/"):
        m = _ENDPOINT_NAME.match(d.endpoint)
        if not m:
            raise SpecError(
                "deploy.endpoint",
                "is not an endpoint resource name",
                value=d.endpoint,
                hint="projects/P/locations/R/endpoints/ID, or a display name",
            )
        if (spec.region and m["region"] != spec.region) or (spec.project and m["project"] != spec.project):
            raise SpecError(
                "deploy.endpoint",
                f"is in {m['project']}/{m['region']}, the job in "
                f"{spec.project or '(no project)'}/{spec.region}",
                has_value=False,
                hint="deploy to an endpoint in the job's project and region, or give a "
                "display name to create one there",
            )
    problem = serving_image_problem(spec, d)
    if problem is not None:
        raise problem


# A prebuilt Vertex AI prediction container for a SavedModel (docs/serving.md: the newest is 2.15).
PREDICTION_IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"


def serving_image_problem(spec: JobSpec, d: DeploySpec) -> SpecError | None:
    """`serving_image: auto` against how the job's code is packaged: auto runs the bundled
    trainer's `python -m trainer.serve` in the training image, so the image must hold it.

    Args:
        spec: the JobSpec.
        d: its deploy: block, or the defaults a deploy uses when it has none (deployment/deploy_request.py).
    Returns:
        the SpecError naming deploy.serving_image and the fix, or None when auto fits.
    """
    if d.serving_image != "auto":
        return None
    said = "is auto" if spec.deploy is not None else "defaults to auto (the spec has no deploy: block)"
    if spec.is_script_job:  # issue 32: your own code's image
        return SpecError(
            "deploy.serving_image",
            f"{said}: auto serves with the bundled trainer's `python -m trainer.serve`, which a "
            "script job's image (your code on the prebuilt training image) does not have",
            has_value=False,
            hint="set deploy.serving_image to a serving container that serves what your code saves "
            f"in AIP_MODEL_DIR: a prebuilt prediction image ({PREDICTION_IMAGE} for a TensorFlow "
            "SavedModel) or your own",
        )
    if spec.image is not None and spec.image.python_package:
        return SpecError(
            "deploy.serving_image",
            f"{said}: auto serves with the job's own image, and a python_package job has none",
            has_value=False,
            hint="set image.repository (build the trainer image), or set deploy.serving_image to a "
            f"serving container URI (e.g. {PREDICTION_IMAGE})",
        )
    if spec.image is not None and spec.image.context:
        return SpecError(
            "deploy.serving_image",
            f"{said}: auto needs the bundled trainer's image (it runs "
            "`python -m trainer.serve`); this spec builds its own context",
            has_value=False,
            hint=f"set deploy.serving_image to a serving container URI that serves the SavedModel "
            f"(e.g. {PREDICTION_IMAGE})",
        )
    return None
