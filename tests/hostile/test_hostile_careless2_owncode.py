"""A careless user misspells a requirement of their own code (issue 42, H2 round 3):
`requirements: [numpyy]` in the spec, `pyyam` in the code's requirements.txt.

`submit --local` refused it (exit 2) with "numpyy (not installed)" and, as the only fix, the pip
command that installs `numpyy`: run as told, it installs a package that is not the one meant, a
typo-squatted one at worst, and the next run goes ahead with it. Now a missing name close to an
installed distribution's is named with it ("did you mean numpy? 2.4.6 is installed") and the fix
is to correct the spelling first; a name close to nothing installed keeps the pip command alone."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import yaml

from tests.cli_support import edge_env
from tests.shared import cli_runner

TASK = "print('ran')\n"


def _local(tmp_path: Path, requirements: list[str], txt: str = ""):
    code = tmp_path / "code"
    code.mkdir()
    (code / "task.py").write_text(TASK)
    if txt:
        (code / "requirements.txt").write_text(txt)
    spec = {
        "name": "own",
        "region": "us-central1",
        "hardware": "cpu",
        "image": {"code": str(code), "script": "task.py", "requirements": requirements},
        "output_dir": str(tmp_path / "out"),
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    return cli_runner(edge_env(tmp_path), cwd=tmp_path)("submit", tmp_path / "spec.yaml", "--local")


def test_a_misspelt_requirement_names_the_installed_package_and_the_spelling_as_the_fix(tmp_path):
    numpy = importlib.metadata.version("numpy")
    proc = _local(tmp_path, ["numpyy==1.0"], txt="pyyam\n")
    assert proc.returncode == 2, proc.stderr
    assert f"numpyy==1.0 (not installed; did you mean numpy? {numpy} is installed)" in proc.stderr
    assert "pyyam (not installed; did you mean pyyaml?" in proc.stderr
    hint = proc.stderr.split("hint:", 1)[1]
    fix = "correct it where it is written (numpyy -> numpy, pyyam -> pyyaml)"
    assert fix in hint and hint.index(fix) < hint.index("pip install")
    assert not (tmp_path / "out").exists()  # nothing started


def test_a_name_close_to_nothing_installed_keeps_the_pip_command_alone(tmp_path):
    proc = _local(tmp_path, ["no-such-dist-vt42==1.0"])
    assert proc.returncode == 2, proc.stderr
    assert "no-such-dist-vt42==1.0 (not installed):" in proc.stderr
    assert "did you mean" not in proc.stderr and "misspelt" not in proc.stderr
    assert "hint: install here:" in proc.stderr and "-m pip install no-such-dist-vt42==1.0" in proc.stderr
