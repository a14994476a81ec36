"""The CI examples parse, authenticate without key files, and call vertex-trainer with real flags."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
GITHUB = ROOT / "examples" / "ci" / "github-actions.yml"
CLOUDBUILD = ROOT / "examples" / "ci" / "cloudbuild.yaml"
# Every page a user reads: the README and all of docs/ (issue 15: every command runs as written).
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _invocations(script: str) -> list[list[str]]:
    """Every `vertex-trainer ...` command in a shell script, as argv (CI expressions -> X)."""
    script = re.sub(r"\$\{\{[^}]*\}\}", "X", script).replace("\\\n", " ")
    found = []
    for line in script.splitlines():
        if "vertex-trainer " not in line or line.lstrip().startswith("#"):
            continue
        command = line[line.index("vertex-trainer ") :]
        command = re.split(r"\s(?:\||>|&&|;|2>)\s?|\s&(?:\s|$)|\s\)(?:\s|$)", command)[0]
        argv = shlex.split(command.replace("$$(", "$("), comments=True)
        found.append(["vertex-trainer", *argv[1:]])
    return found


def _parse(argv: list[str]) -> None:
    """Parse argv with the real CLI's parser: unknown flags, missing values or arguments fail."""
    import typer.main

    from vertex_trainer.cli import app

    command = typer.main.get_command(app)
    ctx = command.context_class(command, info_name="vertex-trainer")
    rest = list(argv[1:])
    while hasattr(command, "get_command"):  # a group (typer vendors its own click)
        name, rest = rest[0], rest[1:]
        sub = command.get_command(ctx, name)
        assert sub is not None, f"no such command: {name} (in {' '.join(argv)})"
        command, ctx = sub, sub.context_class(sub, info_name=name, parent=ctx)
    command.make_context(ctx.info_name, rest, parent=ctx.parent)


def _github_scripts() -> list[str]:
    workflow = yaml.safe_load(GITHUB.read_text())
    return [step["run"] for job in workflow["jobs"].values() for step in job["steps"] if "run" in step]


def _cloudbuild_scripts() -> list[str]:
    config = yaml.safe_load(CLOUDBUILD.read_text())
    return [" ".join(step.get("args", [])) for step in config["steps"]]


def test_github_workflow_uses_workload_identity_and_fails_on_errors():
    workflow = yaml.safe_load(GITHUB.read_text())
    assert workflow["permissions"]["id-token"] == "write"
    steps = [s for job in workflow["jobs"].values() for s in job["steps"]]
    auth = [s for s in steps if str(s.get("uses", "")).startswith("google-github-actions/auth@")]
    assert len(auth) == 1 and "workload_identity_provider" in auth[0]["with"]
    assert "credentials_json" not in GITHUB.read_text()
    for step in steps:
        if "vertex-trainer" in step.get("run", ""):
            assert step.get("shell") == "bash"  # bash -eo pipefail: `| tee` keeps the exit code


def test_cloudbuild_config_uses_the_build_service_account():
    config = yaml.safe_load(CLOUDBUILD.read_text())
    assert config["steps"] and all("name" in s for s in config["steps"])
    text = CLOUDBUILD.read_text()
    assert "GOOGLE_APPLICATION_CREDENTIALS" not in text and "key.json" not in text
    assert config["substitutions"]["_KEY"].startswith("cb-")
    assert config["options"]["dynamicSubstitutions"] is True


@pytest.mark.parametrize("source", ["github", "cloudbuild"])
def test_ci_commands_use_real_flags(source):
    scripts = _github_scripts() if source == "github" else _cloudbuild_scripts()
    commands = [argv for script in scripts for argv in _invocations(script)]
    submits = [argv for argv in commands if argv[1] == "submit"]
    assert submits, "the CI example must submit a job"
    for argv in submits:
        assert "--idempotency-key" in argv and argv[argv.index("--output") + 1] == "json"
    for argv in commands:
        _parse(argv)


def test_commands_in_the_docs_use_real_flags():
    checked = 0
    for doc in DOCS:
        if not doc.exists():
            continue
        for block in re.findall(r"```(?:bash|sh|shell|console)\n(.*?)```", doc.read_text(), re.S):
            for argv in _invocations(block.replace("$ ", "")):
                _parse(argv)
                checked += 1
    assert checked > 0


def test_a_bad_flag_is_caught():
    from typer._click.exceptions import NoSuchOption

    with pytest.raises(NoSuchOption, match="--idempotency"):
        _parse(["vertex-trainer", "submit", "spec.yaml", "--idempotency", "x"])
    with pytest.raises(AssertionError, match="no such command: submitt"):
        _parse(["vertex-trainer", "submitt", "spec.yaml"])
