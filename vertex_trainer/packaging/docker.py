"""The docker builder: the local Docker CLI and daemon.

`docker build --platform linux/amd64 --tag IMAGE -` + `docker push IMAGE`, or
`docker buildx build --platform linux/amd64 --tag IMAGE --push -` when buildx is present. The
reproducible tar.gz is fed on stdin, so Docker builds exactly the hashed context. No CLI or no
daemon -> UserError (exit 2) suggesting `--builder cloud-build`.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from typing import Any

from vertex_trainer.errors import UserError
from vertex_trainer.log import Log
from vertex_trainer.packaging.build_plan import PLATFORM, BuildFailed
from vertex_trainer.spec import validate_image_reference


def docker_commands(image: str, *, buildx: bool, platform: str = PLATFORM) -> list[list[str]]:
    """The commands the docker builder runs; the context tar.gz is fed on stdin to the build
    (`-`), so Docker builds exactly the hashed context. Pure: tested without a daemon."""
    validate_image_reference("image", image)
    if buildx:
        return [["docker", "buildx", "build", "--platform", platform, "--tag", image, "--push", "-"]]
    return [["docker", "build", "--platform", platform, "--tag", image, "-"], ["docker", "push", image]]


def docker_available(run: Callable[..., subprocess.CompletedProcess[Any]] = subprocess.run) -> bool:
    """True when buildx is present, False for plain docker. Raises UserError with the fix when
    docker is unusable (no CLI, no daemon)."""
    if shutil.which("docker") is None:
        raise UserError(
            "the docker builder needs the docker CLI, which is not on PATH",
            hint="install Docker, or use --builder cloud-build",
        )
    probe = run(
        ["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=30
    )
    if probe.returncode != 0:
        reason = (probe.stderr or probe.stdout or "").strip().splitlines()
        raise UserError(
            "the docker builder needs a running Docker daemon: "
            + (reason[-1] if reason else "docker info failed"),
            hint="start Docker, or use --builder cloud-build (no local Docker needed)",
        )
    buildx = run(["docker", "buildx", "version"], capture_output=True, text=True, timeout=30)
    return buildx.returncode == 0


def run_docker_build(image: str, context: bytes, *, log: Log) -> None:
    """Build `image` from the context tar.gz and push it; BuildFailed (exit 3) on failure."""
    buildx = docker_available()
    for cmd in docker_commands(image, buildx=buildx):
        log("docker: " + " ".join(cmd))
        proc = subprocess.run(cmd, input=context if cmd[-1] == "-" else None)
        if proc.returncode != 0:
            hint = None
            if "push" in cmd:
                host = image.split("/", 1)[0]
                hint = f"authenticate Docker to the registry: gcloud auth configure-docker {host}"
            raise BuildFailed(f"`{' '.join(cmd[:3])} ...` exited {proc.returncode}", hint=hint)
