"""Cloud Build (REST v1): build the uploaded context into an image and push it.

`POST v1/projects/{p}/locations/{region}/builds` with one `gcr.io/cloud-builders/docker` step,
`images: [IMAGE]` (Cloud Build pushes it), then follow the build to its end, logging its status
and the running step. Endpoint: `settings.cloudbuild_url()` (an http:// URL is an emulator,
anonymous). The create is sent once, never retried blindly: a second POST would start a second
build. Every GET retries transient failures through the shared ApiClient.
"""

from __future__ import annotations

import time
from typing import Any

from vertex_trainer.errors import ServiceError
from vertex_trainer.gcp.http import TRANSIENT_STATUS, ApiClient, Transient, default_hint, parse_error
from vertex_trainer.log import Log
from vertex_trainer.packaging.build_plan import PLATFORM, TAG_HEX_CHARS
from vertex_trainer.settings import Settings
from vertex_trainer.spec import validate_image_reference

# Cloud Build's maintained Docker builder image.
CLOUD_BUILD_DOCKER_STEP = "gcr.io/cloud-builders/docker"
CLOUD_BUILD_TIMEOUT_S = 3600
BUILD_TERMINAL = {"SUCCESS", "FAILURE", "INTERNAL_ERROR", "TIMEOUT", "CANCELLED", "EXPIRED"}
_PERMANENT_ANSWERS = [s for s in range(400, 600) if s not in TRANSIENT_STATUS]


def cloud_build_request(
    image: str, bucket: str, obj: str, *, context_hash: str, timeout_s: int = CLOUD_BUILD_TIMEOUT_S
) -> dict[str, Any]:
    """The Build resource sent to projects.locations.builds.create (REST JSON, camelCase)."""
    validate_image_reference("image", image)
    return {
        "source": {"storageSource": {"bucket": bucket, "object": obj}},
        "steps": [
            {"name": CLOUD_BUILD_DOCKER_STEP, "args": ["build", "--platform", PLATFORM, "--tag", image, "."]}
        ],
        "images": [image],
        "timeout": f"{timeout_s}s",
        "tags": ["vertex-trainer", f"ctx-{context_hash.split(':', 1)[1][:TAG_HEX_CHARS]}"],
    }


def cloudbuild_api(settings: Settings, *, log: Log | None = None) -> ApiClient:
    return ApiClient.of(
        settings,
        settings.cloudbuild_url(),
        log=log,
        service="Cloud Build",
        hints=default_hint("Cloud Build", "cloudbuild.googleapis.com"),
    )


def run_cloud_build(
    project: str,
    region: str,
    request: dict[str, Any],
    *,
    settings: Settings,
    log: Log,
    poll_max_s: float = 5.0,
) -> dict[str, Any]:
    """Create the build, follow it to the end (showing progress), return the final Build."""
    api = cloudbuild_api(settings, log=log)
    parent = f"projects/{project}/locations/{region}"
    build = _create(api, parent, request)
    build_id = build["id"]
    log_url = build.get("logUrl")
    log(f"cloud-build: build {build_id} created" + (f"; logs: {log_url}" if log_url else ""))
    path = f"v1/{parent}/builds/{build_id}"
    deadline = time.monotonic() + _duration_s(request.get("timeout", "3600s")) + 600
    delay, last_state = 0.1, None
    while True:
        status = build.get("status", "STATUS_UNKNOWN")
        steps = build.get("steps") or []
        running = [i for i, s in enumerate(steps) if s.get("status") == "WORKING"]
        state = (status, tuple(running))
        if state != last_state:
            detail = ""
            if running:
                i = running[0]
                detail = f" (step {i + 1}/{len(steps)}: {steps[i].get('name', '')})"
            log(f"cloud-build: {status}{detail}")
            last_state = state
        if status in BUILD_TERMINAL:
            return build
        if time.monotonic() > deadline:
            raise ServiceError(
                f"build {build_id} still {status} after its timeout",
                hint=f"see {log_url}" if log_url else None,
            )
        time.sleep(delay)
        delay = min(delay * 1.6, poll_max_s)
        build = api.json(f"following build {build_id}", "GET", path)


def _create(api: ApiClient, parent: str, request: dict[str, Any]) -> dict[str, Any]:
    """One POST. Not retried blindly: a second POST would start a second build. A lost answer
    only costs a duplicate build of the same content, and the tag check skips it next time."""
    try:
        resp = api.send(
            "creating the build", "POST", f"v1/{parent}/builds", json=request, allow=_PERMANENT_ANSWERS
        )
    except Transient as exc:
        raise ServiceError(
            f"creating the build failed after 1 attempt: {exc}",
            hint="not retried: the build may have started anyway; run the same "
            "command again (an image already pushed is reused)",
        ) from None
    if resp.status_code != 200:
        raise ServiceError(
            f"Cloud Build refused the build (HTTP {resp.status_code}): {parse_error(resp).message}",
            hint="enable the Cloud Build API and grant roles/cloudbuild.builds.editor"
            if resp.status_code in (403, 404)
            else None,
        )
    try:
        build = (resp.json().get("metadata") or {}).get("build") or {}
    except (ValueError, AttributeError):
        build = {}
    if not build.get("id"):
        raise ServiceError(f"Cloud Build answered without a build id: {resp.text[:300]}")
    return build


def _duration_s(value: str) -> float:
    try:
        return float(str(value).rstrip("s"))
    except ValueError:
        return CLOUD_BUILD_TIMEOUT_S
