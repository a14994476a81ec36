"""From a finished job (or a model directory) and the spec's `deploy:` block to a DeployRequest,
and the checks a deploy makes before anything is sent. Called by api.deploy.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from vertex_trainer.contract import SERVE_MODULE, SUCCEEDED, short_state
from vertex_trainer.errors import ServiceError, UserError
from vertex_trainer.gcp import storage
from vertex_trainer.log import Log
from vertex_trainer.settings import Settings
from vertex_trainer.spec import DeploySpec, JobSpec
from vertex_trainer.spec.deploy_block import serving_image_problem
from vertex_trainer.spec.rules import gcs_problem
from vertex_trainer.vertex.model_deploy import DeployRequest as DeployRequest  # (the package's name)
from vertex_trainer.vertex.model_deploy import ServingContainer


def deploy_block(spec: JobSpec) -> DeploySpec:
    """The spec's deploy: block, or its defaults (model and endpoint named after the spec)."""
    return spec.deploy or DeploySpec()


def from_job(spec: JobSpec, job: dict[str, Any]) -> tuple[str, str, str]:
    """(artifact_uri, job label, training image) of a finished CustomJob resource."""
    name = job.get("name", "")
    state = job.get("state", "")
    if state != SUCCEEDED:
        raise UserError(
            f"job {name} is {short_state(str(state))}: only a job that SUCCEEDED can be deployed",
            hint=f"follow it: vertex-trainer status {name} --wait",
        )
    base = ((job.get("jobSpec") or {}).get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if not base:
        raise UserError(
            f"job {name} has no output directory, so it exported no model",
            hint="set output_dir in the spec, or pass --model-dir",
        )
    pool = ((job.get("jobSpec") or {}).get("workerPoolSpecs") or [{}])[0]
    image = (pool.get("containerSpec") or {}).get("imageUri") or ""
    return f"{base.rstrip('/')}/model", name.rsplit("/", 1)[-1], image


def from_model_dir(model_dir: str, planned_image: str | None) -> tuple[str, str, str]:
    """(artifact_uri, label, image) for a model directory given directly."""
    if not model_dir.startswith("gs://"):
        raise UserError(
            f"--model-dir {model_dir!r}: Vertex AI registers models from Cloud Storage",
            hint="copy it to gs://BUCKET/PATH first, or serve it here with "
            f"`vertex-trainer serve {model_dir}`",
        )
    bad = gcs_problem(model_dir)
    if bad:
        raise UserError(f"--model-dir {model_dir!r}: {bad}")
    # A label value that names the directory: the same directory deployed twice is one version.
    label = "dir-" + hashlib.sha256(model_dir.rstrip("/").encode()).hexdigest()[:16]
    return model_dir.rstrip("/"), label, planned_image or ""


def request(spec: JobSpec, artifact_uri: str, job_label: str, image: str) -> DeployRequest:
    """The DeployRequest of the spec's deploy: block (or its defaults) for one model.

    Raises:
        SpecError: deploy.serving_image is auto (said, or the default of a spec with no deploy:
            block) and the job's image does not hold the bundled trainer's server (exit 2).
        UserError: auto, and no training image is known for the model (exit 2).
    """
    d = deploy_block(spec)
    problem = serving_image_problem(spec, d)  # the spec's own rule, for the defaults too
    if problem is not None:
        raise problem
    if d.serving_image == "auto":
        if not image:
            raise UserError(
                "deploy.serving_image: auto serves with the training image, and none is known for this model",
                hint="set deploy.serving_image to a serving container URI, or deploy with --job",
            )
        container = ServingContainer(image, command=("python", "-m", SERVE_MODULE))
    else:
        container = ServingContainer(d.serving_image)
    return DeployRequest(
        model_display_name=d.model or spec.name,
        artifact_uri=artifact_uri,
        container=container,
        job_id=_label_value(job_label),
        endpoint=d.endpoint or spec.name,
        machine_type=d.machine_type,
        accelerator_type=d.accelerator_type,
        accelerator_count=d.accelerator_count,
        min_replicas=d.min_replicas,
        max_replicas=d.max_replicas or d.min_replicas,
        traffic=d.traffic,
        keep_previous=d.keep_previous,
        labels=dict(spec.labels),
        service_account=spec.service_account,
    )


def check_model_dir(settings: Settings, artifact_uri: str, *, log: Log) -> None:
    """The export must exist before anything is registered (exit 2). Skipped offline without a
    storage emulator, like the bucket pre-flight; an unreadable bucket only warns. Only its first
    byte is read: a saved_model.pb is up to 2 GB, and it was downloaded whole to be seen."""
    if settings.offline and not settings.storage_emulator:
        return
    try:
        found = storage.read_bytes(settings, f"{artifact_uri.rstrip('/')}/saved_model.pb", 0)
    except UserError:
        raise
    except Exception as exc:
        log(f"warning: could not check {artifact_uri} ({type(exc).__name__}); deploying anyway")
        return
    if found is None:
        raise UserError(
            f"no SavedModel at {artifact_uri} (saved_model.pb is missing); nothing was sent",
            hint="deploy a job that SUCCEEDED and exported its model (output_dir/model)",
        )


def dry_run(client: Any, req: DeployRequest) -> dict[str, Any]:
    """What a deploy would send, in order, with no connection opened."""
    base = client.api.url(f"v1/{client.parent}")
    return {
        "dry_run": True,
        "model": req.model_display_name,
        "endpoint": req.endpoint,
        "requests": [
            {
                "method": "GET",
                "url": f"{base}/models",
                "params": {"filter": f'display_name="{req.model_display_name}"'},
            },
            {"method": "POST", "url": f"{base}/models:upload", "body": {"model": req.model_body()}},
            {
                "method": "GET",
                "url": f"{base}/endpoints",
                "params": {"filter": f'display_name="{req.endpoint}"'},
            },
            {
                "method": "POST",
                "url": f"{base}/endpoints/ENDPOINT_ID:deployModel",
                "body": {
                    "deployedModel": req.deployed_model("MODEL", "VERSION"),
                    "trafficSplit": {"0": req.traffic, "...": "the serving versions share the rest"},
                },
            },
        ],
    }


def _label_value(text: str) -> str:
    value = re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-")[:63]
    if not value:
        raise ServiceError(f"cannot make a label value of {text!r}")
    return value
