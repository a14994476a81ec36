"""A refused requirement is quoted in its error (exit 2, naming the line), and requirements hold
credentials: a private index (`--extra-index-url https://me:TOKEN@host/simple`) or a git URL with a
token as its user (`git+https://ghp_...@github.com/...`). The message goes to a terminal and from
there to CI logs: the URL's user part is shown as `***`, the rest of the line as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cli_support import edge_env
from tests.shared import cli_runner
from vertex_trainer.redact import userinfo_masked

SECRET = "s3cr3t-TOKEN"
INDEX = f"--extra-index-url https://alice:{SECRET}@pypi.example.com/simple"
GIT = f"git+https://ghp_{SECRET}@github.com/acme/lib.git"


def _spec(tmp_path: Path, requirements_txt: str, **image: object) -> Path:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "task.py").write_text("print('hi')\n")
    (code / "requirements.txt").write_text(requirements_txt)
    spec = tmp_path / "spec.yaml"
    data = {
        "name": "reqs",
        "hardware": "cpu",
        "project": "my-project-1",
        "region": "us-central1",
        "output_dir": "gs://out-bucket/runs",
        "image": {
            "code": str(code),
            "script": "task.py",
            "repository": "us-docker.pkg.dev/my-project-1/t",
            **image,
        },
    }
    spec.write_text(yaml.safe_dump(data))
    return spec


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        (INDEX, "--extra-index-url https://***@pypi.example.com/simple"),
        (GIT, "git+https://***@github.com/acme/lib.git"),
    ],
)
@pytest.mark.parametrize("command", [("validate",), ("submit", "--dry-run"), ("package", "--dry-run")])
def test_a_refused_requirements_line_is_quoted_without_its_credential(tmp_path, line, shown, command):
    spec = _spec(tmp_path, f"numpy==1.26.4\n{line}\n")
    result = cli_runner(edge_env(tmp_path), cwd=tmp_path)(command[0], spec, *command[1:])
    assert result.returncode == 2, result.stdout + result.stderr
    out = result.stdout + result.stderr
    assert SECRET not in out
    assert "requirements.txt line 2" in out and shown in out


def test_a_refused_spec_requirement_is_quoted_without_its_credential(tmp_path):
    spec = _spec(tmp_path, "", requirements=["numpy==1.26.4", GIT])
    result = cli_runner(edge_env(tmp_path), cwd=tmp_path)("validate", spec)
    assert result.returncode == 2, result.stdout + result.stderr
    out = result.stdout + result.stderr
    assert SECRET not in out and "git+https://***@github.com/acme/lib.git" in out
    assert "image.requirements[1]" in out


def test_only_the_user_part_of_a_url_is_masked():
    assert userinfo_masked(f"a https://me:{SECRET}@h/x and ssh://git@h:22/r") == (
        "a https://***@h/x and ssh://***@h:22/r"
    )
    plain = "pandas==2.2.3 https://pypi.org/simple me@example.com"
    assert userinfo_masked(plain) == plain
