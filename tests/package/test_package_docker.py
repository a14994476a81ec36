"""The docker builder: its commands (a pure function) and a clear error without a daemon."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from vertex_trainer import packaging as p
from vertex_trainer.errors import UserError

IMAGE = "us-central1-docker.pkg.dev/test-project/training/trainer:0123456789abcdef01234567"


def test_plain_docker_builds_from_stdin_then_pushes():
    assert p.docker_commands(IMAGE, buildx=False) == [
        ["docker", "build", "--platform", "linux/amd64", "--tag", IMAGE, "-"],
        ["docker", "push", IMAGE],
    ]


def test_buildx_builds_and_pushes_in_one_step():
    assert p.docker_commands(IMAGE, buildx=True) == [
        ["docker", "buildx", "build", "--platform", "linux/amd64", "--tag", IMAGE, "--push", "-"]
    ]


def test_commands_refuse_a_smuggled_argument():
    with pytest.raises(UserError):
        p.docker_commands(IMAGE + " --build-arg X=$(id)", buildx=False)


def _fake_run(info_rc: int, buildx_rc: int, stderr: str = ""):
    def run(cmd, **kwargs):
        rc = info_rc if cmd[1] == "info" else buildx_rc
        return subprocess.CompletedProcess(cmd, rc, stdout="", stderr=stderr if rc else "")

    return run


def test_daemon_probe(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/docker")
    assert p.docker_available(_fake_run(0, 0)) is True  # buildx present
    assert p.docker_available(_fake_run(0, 1)) is False  # plain docker build + push
    with pytest.raises(UserError) as e:
        p.docker_available(
            _fake_run(1, 0, "Cannot connect to the Docker daemon at unix:///var/run/docker.sock")
        )
    assert e.value.exit_code == 2
    assert "Cannot connect to the Docker daemon" in str(e.value) and "cloud-build" in e.value.hint


def test_no_docker_cli_is_a_user_error(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(UserError) as e:
        p.docker_available()
    assert "docker CLI" in str(e.value)


@pytest.mark.skipif(shutil.which("docker") is None, reason="no docker CLI here")
def test_ensure_with_docker_and_no_daemon_fails_clearly(make_spec, trainer_dir, registry, settings):
    probe = subprocess.run(["docker", "info"], capture_output=True, timeout=30)
    if probe.returncode == 0:
        pytest.skip("a Docker daemon is running here")
    with pytest.raises(UserError) as e:
        p.ensure_artifact(make_spec(builder="docker"), settings=settings, trainer_dir=trainer_dir)
    assert e.value.exit_code == 2 and "Docker daemon" in str(e.value)
    # The registry was asked first: an existing tag needs no daemon at all.
    plan = p.plan_build(make_spec(builder="docker"), trainer_dir=trainer_dir)
    registry.add(plan.target)
    result = p.ensure_artifact(make_spec(builder="docker"), settings=settings, trainer_dir=trainer_dir)
    assert result.action == "reused" and result.builder == "docker"


def test_builder_flag_overrides_the_spec(make_spec, trainer_dir):
    spec = make_spec(builder="docker")
    assert p.plan_build(spec, trainer_dir=trainer_dir).builder == "docker"
    assert p.plan_build(spec, "cloud-build", trainer_dir=trainer_dir).builder == "cloud-build"
    with pytest.raises(UserError) as e:
        p.plan_build(spec, "kaniko", trainer_dir=trainer_dir)
    assert "--builder" in str(e.value)
