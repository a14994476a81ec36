"""Installable as a package (issue 40 item 7): the wheel built from this tree, installed into a
fresh virtual environment with the core dependencies only (no TensorFlow, no extra), gives a
working CLI; a command that needs an extra says which, in one line.

Offline and in seconds. A pip install of the wheel from the registry takes half a minute with a
warm mirror, and needs the network; instead:
- the wheel: `python -m build --wheel --no-isolation` (the dev extra holds its backend) of a
  copy of the tree's packages, so the build's build/ and *.egg-info never land in the tree;
- the core: the closure of the wheel's own Requires-Dist (no extra), taken from the distributions
  installed here, each of their files (RECORD) linked into one folder that a .pth file puts on the
  fresh environment's path: what a core install holds, nothing more;
- the install: `pip --python FRESH install --no-index --isolated WHEEL`: pip must find every
  requirement satisfied from that folder (or fails naming the missing one), then installs the
  wheel and its console script as for a user.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.cli_support import edge_env

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "job_specs" / "resnet50-a100x8.yaml"
LOCAL_SPEC = ROOT / "job_specs" / "quickstart-local.yaml"
# What no core install holds: TensorFlow and tf-keras, and each extra's libraries.
NOT_IN_THE_CORE = (
    "tensorflow",
    "tf_keras",
    "apache_beam",
    "kfp",
    "google_cloud_pipeline_components",
    "functions_framework",
    "matplotlib",
    "gcp_storage_emulator",
    "hypertune",
    "xprof",
)


# -- the environment -------------------------------------------------------------------------------


def closure(requirements: list[str]) -> dict[str, Any]:
    """The installed distributions `requirements` (Requires-Dist lines, no extra) need, transitively,
    by canonical name. A requirement met by nothing installed here fails the test, naming it."""
    import importlib.metadata as md

    installed = {canonicalize_name(d.metadata["Name"]): d for d in md.distributions()}
    found: dict[str, frozenset[str]] = {}
    todo = [(Requirement(r), frozenset({""})) for r in requirements]
    while todo:
        req, extras = todo.pop()
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in extras):
            continue
        name = canonicalize_name(req.name)
        assert name in installed, f"{req} is not installed here: `make install`"
        wanted = frozenset(req.extras) | {""}
        if wanted <= found.get(name, frozenset()):
            continue
        found[name] = found.get(name, frozenset()) | wanted
        todo += [(Requirement(r), found[name]) for r in installed[name].requires or []]
    return {name: installed[name] for name in found}


def link_files(dists: dict[str, Any], view: Path) -> int:
    """Link the files of `dists` (their RECORDs) into `view`, laid out as in site-packages: a folder
    whose files are all theirs (caches aside) as one link, the others' files one by one (a link
    costs half a millisecond on a busy disk: ~11,000 files would take seconds). Returns the links."""
    by_base: dict[Path, set[str]] = {}
    for dist in dists.values():
        assert dist.files is not None, f"{dist.metadata['Name']} has no RECORD"
        owned = by_base.setdefault(Path(dist.locate_file("")), set())
        owned.update(f.as_posix() for f in dist.files if f.parts[0] != "..")  # not bin/'s scripts
    links = 0
    for base, owned in by_base.items():
        folders = {path.rsplit("/", n)[0] for path in owned for n in range(1, path.count("/") + 1)}

        @functools.cache
        def whole(rel: str, owned: set[str] = owned, folders: set[str] = folders, base: Path = base) -> bool:
            for entry in os.scandir(base / rel):
                child = f"{rel}/{entry.name}"
                if entry.name == "__pycache__":
                    continue
                if not (
                    whole(child)
                    if entry.is_dir(follow_symlinks=False) and child in folders
                    else child in owned
                ):
                    return False
            return True

        def place(rel: str, owned: set[str] = owned, folders: set[str] = folders, base: Path = base) -> int:
            made = 0
            for entry in os.scandir(base / rel):
                child = f"{rel}/{entry.name}".lstrip("/")
                if entry.is_dir(follow_symlinks=False) and child in folders and not whole(child):
                    (view / child).mkdir(parents=True, exist_ok=True)
                    made += place(child)
                elif child in owned or (child in folders and entry.is_dir(follow_symlinks=False)):
                    (view / child).symlink_to(base / child)
                    made += 1
            return made

        view.mkdir(parents=True, exist_ok=True)
        links += place("")
    return links


def build_wheel(out: Path) -> Path:
    """The wheel of this tree's packages, as `python -m build` makes it."""
    src = out / "src"
    src.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for name in ("vertex_trainer", "trainer_image"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    build = [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out / "dist")]
    done = subprocess.run([*build, str(src)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = (out / "dist").glob("vertex_trainer-*.whl")
    return wheel


class Installed:
    """The wheel installed into a fresh virtual environment beside the core's folder."""

    def __init__(self, base: Path):
        self.base = base
        self.wheel = build_wheel(base / "build")
        self.venv = base / "venv"
        metadata = self.metadata
        core = [v for k, v in metadata if k == "Requires-Dist" and "extra ==" not in v]
        self.core = closure(core)
        self.view = base / "core"
        link_files(self.core, self.view)
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(self.venv)], check=True, timeout=120
        )
        (site,) = self.venv.glob("lib/python3*/site-packages")
        (site / "vertex_trainer_test_core.pth").write_text(f"{self.view}\n")
        pip = [sys.executable, "-m", "pip", "--python", str(self.python), "install", "--isolated"]
        done = subprocess.run(
            [*pip, "--no-index", "--no-cache-dir", "--disable-pip-version-check", str(self.wheel)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        self.pip_output = done.stdout
        self.home = base / "home"
        self.home.mkdir()

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def metadata(self) -> list[tuple[str, str]]:
        with zipfile.ZipFile(self.wheel) as z:
            name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            text = z.read(name).decode().split("\n\n", 1)[0]
        return [(k, v.strip()) for k, _, v in (line.partition(":") for line in text.splitlines())]

    def env(self, **extra: str) -> dict[str, str]:
        """A user's shell with the fresh environment first on PATH and nothing of this one's."""
        env = edge_env(self.home)
        env.pop("VERTEX_TRAINER_RETRY", None)  # a user's timeouts: the fake's first answer is slow
        for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"):
            env.pop(name, None)
        env.update(PATH=f"{self.venv / 'bin'}{os.pathsep}/usr/local/bin:/usr/bin:/bin", HOME=str(self.home))
        env.update(extra)
        return env

    def run(self, *args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
        """`vertex-trainer ARGS...`: the console script the wheel installed."""
        return subprocess.run(
            [str(self.venv / "bin" / "vertex-trainer"), *args],
            capture_output=True,
            text=True,
            cwd=cwd or self.home,
            env=self.env(**env),
            timeout=180,
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    return Installed(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def quickstart(installed, tmp_path_factory) -> Path:
    """A folder holding the quickstart spec's data (data/quickstart), made by the installed
    `data synth`: a core command (numpy and Pillow, no TensorFlow)."""
    work = tmp_path_factory.mktemp("quickstart")
    synth = ("data", "synth", "data/quickstart", "--examples", "16", "--shards", "1", "--image-size", "8")
    done = installed.run(*synth, "--num-classes", "2", "--eval-examples", "8", cwd=work)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (work / "data" / "quickstart").iterdir()) == [
        "train-00000-of-00001",
        "validation-00000-of-00001",
    ]
    return work


# -- the wheel ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_wheel_holds_the_two_packages_their_data_and_nothing_else(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    tops = {n.split("/")[0] for n in names}
    assert tops == {"vertex_trainer", "trainer", f"{installed.wheel.name.split('-py')[0]}.dist-info"}
    # Every file git holds in the two packages is in it: the code and the package data (templates,
    # catalog tables, the price snapshot, the emulators' JSON, py.typed).
    tracked = subprocess.run(
        ["git", "ls-files", "vertex_trainer", "trainer_image/trainer"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout.split()
    expected = {t.removeprefix("trainer_image/") for t in tracked}
    assert expected and expected - names == set()
    assert {"vertex_trainer/templates/Dockerfile.j2", "vertex_trainer/pricing/snapshot.json"} <= names
    requires = [v for k, v in installed.metadata if k == "Requires-Dist"]
    core = [r for r in requires if "extra ==" not in r]
    assert core and not [r for r in core if re.match(r"(tensorflow|tf-keras|keras)\b", r, re.I)]
    extras = {v for k, v in installed.metadata if k == "Provides-Extra"}
    assert {"trainer", "sandbox", "data", "pipelines", "trigger", "report"} <= extras


@pytest.mark.slow
def test_the_core_install_has_no_tensorflow_and_no_extra(installed):
    assert "Successfully installed vertex-trainer" in installed.pip_output
    assert "tensorflow" not in installed.core and "tensorflow-cpu" not in installed.core
    code = (
        "import importlib.util, json, vertex_trainer, trainer\n"
        f"names = {NOT_IN_THE_CORE!r}\n"
        "print(json.dumps([vertex_trainer.__file__, trainer.__file__,"
        " [n for n in names if importlib.util.find_spec(n) is not None]]))\n"
    )
    done = subprocess.run(
        [str(installed.python), "-c", code],
        capture_output=True,
        text=True,
        cwd=installed.home,
        env=installed.env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    package, trainer, present = json.loads(done.stdout)
    site = str(installed.venv / "lib")
    assert package.startswith(site) and trainer.startswith(site)  # the installed copy, not this tree
    assert present == []
    tf = subprocess.run(
        [str(installed.python), "-c", "import tensorflow"],
        capture_output=True,
        text=True,
        env=installed.env(),
    )
    assert "No module named 'tensorflow'" in tf.stderr


# -- the CLI of the core install ---------------------------------------------------------------------


@pytest.mark.slow
def test_validate_render_and_the_dry_run_of_a_bundled_spec(installed):
    shown = installed.run("--help")
    assert shown.returncode == 0 and "validate" in shown.stdout and "submit" in shown.stdout
    if "--version" in shown.stdout:  # the flag issue 40 item 4 adds: the installed copy's version
        version = installed.wheel.name.split("-")[1]
        assert installed.run("--version").stdout.strip() == f"vertex-trainer {version}"

    checked = installed.run("validate", str(SPEC))
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith("OK ") and "a2-highgpu-8g" in checked.stdout

    rendered = installed.run("render", str(SPEC))
    assert rendered.returncode == 0, rendered.stderr
    job = json.loads(rendered.stdout)
    (pool,) = job["jobSpec"]["workerPoolSpecs"]
    assert pool["machineSpec"]["acceleratorType"] == "NVIDIA_TESLA_A100"
    # The image tag is the content hash of the context the installed copy would build: its
    # Dockerfile from the packaged templates, its trainer from the installed package.
    image = pool["containerSpec"]["imageUri"]
    assert re.fullmatch(r"us-central1-docker\.pkg\.dev/my-project/training/trainer:[0-9a-f]{24}", image)

    dry = installed.run("submit", str(SPEC), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("# dry run: nothing was sent")
    assert re.search(
        r"^POST https://us-central1-aiplatform\.googleapis\.com/v1/projects/my-project/"
        r"locations/us-central1/customJobs$",
        dry.stdout,
        re.M,
    )
    assert f"image: {image}" in dry.stdout

    estimate = installed.run("cost", str(SPEC))
    assert estimate.returncode == 0 and "snapshot" in estimate.stdout, estimate.stderr


@pytest.mark.slow
def test_submit_and_status_against_the_installed_fake_vertex(installed):
    fake = subprocess.Popen(
        [str(installed.venv / "bin" / "vertex-trainer"), "dev", "fake-vertex", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=installed.home,
        env=installed.env(),
    )
    try:
        assert fake.stdout is not None
        first = fake.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+", first)
        assert url, first + (fake.stdout.read() if fake.poll() is not None else "")
        endpoint = {"VERTEX_TRAINER_API_ENDPOINT": url.group(0)}
        ready = ("--set", "image.repository=null", "--set", "image.uri=us-docker.pkg.dev/my-project/r/t:v1")
        created = installed.run("submit", str(SPEC), *ready, "--output", "json", **endpoint)
        assert created.returncode == 0, created.stderr
        name = json.loads(created.stdout)["name"]
        status = installed.run("status", name, **endpoint)
        assert status.returncode == 0, status.stderr
        assert name in status.stdout and re.search(r"^state\s+\w+", status.stdout, re.M)
    finally:
        fake.terminate()
        fake.wait(timeout=30)


@pytest.mark.slow
def test_each_command_that_needs_an_extra_says_which(installed, quickstart):
    images = quickstart / "images" / "cat"
    images.mkdir(parents=True)
    session = quickstart / "trace" / "plugins" / "profile" / "2026_01_01_00_00_00"
    session.mkdir(parents=True)
    (session / "host.xplane.pb").write_bytes(b"")
    cases = {
        ("submit", str(LOCAL_SPEC), "--local"): "pip install 'vertex-trainer[trainer]'",
        ("dev", "sandbox", "--", "true"): "pip install 'vertex-trainer[sandbox]'",
        ("dev", "gcs-emulator"): "pip install 'vertex-trainer[sandbox]'",
        ("data", "convert", "images", "out"): "pip install 'vertex-trainer[data]'",
        ("pipeline", "compile", str(SPEC)): "pip install 'vertex-trainer[pipelines]'",
        ("profile", "trace"): "pip install 'vertex-trainer[profile]'",
    }
    for args, hint in cases.items():
        done = installed.run(*args, cwd=quickstart)
        assert (done.returncode, "Traceback" in done.stderr) == (2, False), (args, done.stderr)
        assert hint in done.stderr, (args, done.stderr)


@pytest.mark.slow
def test_a_local_run_with_tensorflow_but_no_tf_keras_says_how_to_install_it(installed, quickstart, tmp_path):
    """The trainer extra installs tensorflow-cpu but cannot install tf-keras (it names the
    `tensorflow` distribution): a pip user's local run says the one command, before any replica
    starts. The TensorFlow installed here is put on the path for this one command (the check looks
    it up without importing it, as it looks up tf-keras)."""
    import importlib.util

    found = importlib.util.find_spec("tensorflow")
    assert found is not None and found.submodule_search_locations
    (tmp_path / "tf").mkdir()
    (tmp_path / "tf" / "tensorflow").symlink_to(next(iter(found.submodule_search_locations)))
    tf = {"PYTHONPATH": str(tmp_path / "tf")}
    done = installed.run("submit", str(LOCAL_SPEC), "--local", cwd=quickstart, **tf)
    assert (done.returncode, "Traceback" in done.stderr) == (2, False), done.stderr
    assert "needs tf-keras" in done.stderr and "pip install --no-deps tf-keras==2.21.0" in done.stderr


@pytest.mark.parametrize(
    "missing, says", [("tensorflow", "vertex-trainer[trainer]"), ("tf_keras", "tf-keras==")]
)
def test_the_bundled_trainers_replicas_are_not_started_without_tensorflow_or_tf_keras(
    missing, says, monkeypatch
):
    from vertex_trainer.errors import UserError
    from vertex_trainer.local.cluster import Replica, check_importable

    monkeypatch.setitem(sys.modules, missing, None)  # as an environment without it: not found
    trainer = Replica(0, 0, "127.0.0.1:1", (sys.executable, "-m", "trainer.task"), {})
    with pytest.raises(UserError) as e:
        check_importable([trainer])
    assert e.value.exit_code == 2 and says in (e.value.hint or "")
    check_importable([Replica(0, 0, "127.0.0.1:1", (sys.executable, "-m", "json.tool"), {})])  # not ours


def test_the_trainer_itself_says_what_to_install_in_one_line(tmp_path):
    """Started without make's environment (python -m trainer.task where TensorFlow is missing, or
    tf-keras beside it), the trainer prints one line naming the install, not a traceback."""
    flags = ["--train_data=gs://b/train-*", "--num_classes=2"]
    flags += [f"--{d}_dir={tmp_path / d}" for d in ("model", "checkpoint", "tensorboard")]
    run = "import sys; sys.modules['tensorflow'] = None\nfrom trainer import task\n"
    run += f"sys.exit(task.main({flags!r}))"
    done = subprocess.run(
        [sys.executable, "-c", run], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert (done.returncode, done.stderr) == (
        1,
        "error: the trainer needs TensorFlow, which is not installed here: "
        "pip install 'vertex-trainer[trainer]' (or tensorflow itself)\n",
    )
    # tf-keras missing beside a TensorFlow (a stand-in here: the real one takes seconds to import).
    keras = (
        "import sys, types; sys.modules['tensorflow'] = types.SimpleNamespace(__version__='2.21.0')\n"
        "sys.modules['tf_keras'] = None\n"
        "try:\n    import trainer._keras\nexcept ModuleNotFoundError as e:\n    print(e.name, e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", keras], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert done.stdout.startswith("tf_keras the trainer needs tf-keras (Keras 2) for TensorFlow 2.21.0")
    assert done.stdout.rstrip().endswith("pip install --no-deps 'tf-keras==2.21.*'"), (
        done.stdout + done.stderr
    )


def test_the_tf_keras_command_installs_the_makefiles_tf_keras():
    from vertex_trainer import lazy

    pinned = re.search(r"^TF_KERAS := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert pinned and f"pip install --no-deps {pinned.group(1)} " in lazy.LIBRARIES["tf_keras"].install


@pytest.mark.slow
def test_an_installed_copy_builds_the_image_with_the_checkouts_requirements(installed):
    """The wheel carries no trainer_image/requirements.txt: the trainer extra stands in for it
    (packaging.templates.trainer_requirements), and must name the same requirements."""
    code = (
        "from vertex_trainer.packaging.templates import bundled_trainer_dir, trainer_requirements\n"
        "print(trainer_requirements(bundled_trainer_dir()).decode())\n"
    )
    done = subprocess.run(
        [str(installed.python), "-c", code], capture_output=True, text=True, env=installed.env(), timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# generated from the vertex-trainer[trainer] extra")
    from vertex_trainer.packaging.templates import is_framework_requirement

    def names(text: str) -> set[str]:
        lines = (ln.split("#")[0].strip() for ln in text.splitlines())
        return {
            canonicalize_name(Requirement(ln).name) for ln in lines if ln and not is_framework_requirement(ln)
        }

    checkout = (ROOT / "trainer_image" / "requirements.txt").read_text()
    assert names(done.stdout) == names(checkout) and "cloudml-hypertune" in names(checkout)
