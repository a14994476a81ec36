"""One lazy-import adaptor (issue 25 item 4): every optional library is named once, with its extra,
and a missing one is the same message (exit 2) wherever it is needed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vertex_trainer import lazy
from vertex_trainer.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = (
    "kfp",
    "google_cloud_pipeline_components",
    "apache_beam",
    "functions_framework",
    "google.cloud.aiplatform",
    "tensorflow",
)


def test_the_table_names_each_optional_library_and_its_extra_once():
    assert set(OPTIONAL) <= set(lazy.LIBRARIES)
    extras = {name: lazy.LIBRARIES[name].extra for name in OPTIONAL}
    assert extras == {
        "kfp": "pipelines",
        "google_cloud_pipeline_components": "pipelines",
        "apache_beam": "data",
        "functions_framework": "trigger",
        "google.cloud.aiplatform": None,
        "tensorflow": "trainer",
    }
    pyproject = (ROOT / "pyproject.toml").read_text()
    for lib in lazy.LIBRARIES.values():  # each extra named is one pyproject.toml defines
        assert lib.extra is None or f"\n{lib.extra} = [" in pyproject


@pytest.mark.parametrize("name", OPTIONAL)
def test_a_missing_library_is_one_message_with_its_install_command(name, monkeypatch):
    monkeypatch.setitem(sys.modules, name, None)  # what an environment without it does on import
    with pytest.raises(UserError) as e:
        lazy.require(name)
    lib = lazy.LIBRARIES[name]
    assert e.value.exit_code == 2
    assert str(e.value).startswith(f"{lib.purpose} needs {lib.distribution}: ")
    expected = (
        f"pip install 'vertex-trainer[{lib.extra}]'" if lib.extra else f"pip install {lib.distribution}"
    )
    assert e.value.hint.startswith(expected)


def test_a_module_inside_a_library_names_the_library_that_is_missing():
    # A fresh interpreter: in this one the components may be imported already.
    code = (
        "import sys; sys.modules['kfp'] = None\n"
        "from vertex_trainer import lazy\n"
        "try:\n    lazy.require('google_cloud_pipeline_components.v1.custom_job')\n"
        "except Exception as e:\n    print(type(e).__name__, e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.startswith(
        "UserError compiling a Vertex AI pipeline needs kfp: kfp is not installed here"
    ), proc.stdout + proc.stderr


def test_a_lazy_module_imports_on_first_use_only():
    lazy_kfp = lazy.LazyModule("kfp")
    assert "not imported yet" in repr(lazy_kfp)
    assert lazy_kfp.dsl.pipeline is not None and "imported" in repr(lazy_kfp)
    with pytest.raises(KeyError, match="not an optional library"):
        lazy.require("yaml")  # a typo or a core dependency is a bug, not a missing extra


@pytest.mark.parametrize(
    "blocked, argv, install",
    [
        ("apache_beam", ["data", "convert", "{tmp}/images", "{tmp}/out"], "vertex-trainer[data]"),
        ("kfp", ["pipeline", "compile", "{spec}"], "vertex-trainer[pipelines]"),
    ],
)
def test_the_cli_says_which_extra_to_install(blocked, argv, install, tmp_path):
    (tmp_path / "images" / "cat").mkdir(parents=True)
    spec = tmp_path / "job.yaml"
    spec.write_text(
        textwrap.dedent("""\
        name: lazy
        project: test-project
        region: us-central1
        hardware: cpu
        image: {uri: us-docker.pkg.dev/test-project/training/trainer:v1}
        output_dir: gs://test-bucket/runs/lazy
        trainer: {model: tiny-cnn, train_data: gs://test-bucket/data/train-*, num_classes: 2}
        """)
    )
    args = [a.format(tmp=tmp_path, spec=spec) for a in argv]
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"  # the library is not installed
        "from vertex_trainer.cli import main\n"
        f"sys.argv = ['vertex-trainer', *{args!r}]\nmain()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and f"pip install '{install}'" in proc.stderr
