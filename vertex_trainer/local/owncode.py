"""A script job run here (`submit --local`): your code from image.code, as Vertex AI runs it.

Each replica runs `python SCRIPT ARGS` (or `python -m MODULE ARGS`) with image.code as its
working directory, as the generated image's ENTRYPOINT does from /opt/code; cluster.py gives it
the environment Vertex AI sets (AIP_* directories, CLUSTER_SPEC, TF_CONFIG, the spec's env).
Before anything starts, `preflight` checks what would otherwise end as a traceback in a
replica's log: the directory, the script or module, and every requirement, in this interpreter
(a package folder's own dependencies too: spec/package_folder.py reads them as pypa build does).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.metadata
import importlib.util
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement  # pip's own parser (a dependency of pypa build)

from vertex_trainer.errors import SpecError
from vertex_trainer.local.cluster import Replica
from vertex_trainer.spec import JobSpec
from vertex_trainer.spec.factory import trainer_of
from vertex_trainer.spec.images import (
    check_entry,
    code_requirements,
    code_root,
    entry_argv,
    requirement_lines,
)
from vertex_trainer.spec.package_folder import read_package

# Requirements the local TensorFlow satisfies whatever its distribution is called (tensorflow-cpu
# here stands in for the image's tensorflow; tf-keras is the Keras 2 of that TensorFlow).
_IMPORT_NAMES = {
    "tensorflow": "tensorflow",
    "tensorflow-cpu": "tensorflow",
    "tensorflow-gpu": "tensorflow",
    "tensorflow-tpu": "tensorflow",
    "tf-keras": "tf_keras",
}
# How alike a missing requirement's name and an installed one's must be to ask "did you mean"
# (difflib's ratio: numpyy/numpy 0.91, pandsa/pandas 0.83; unrelated names stay well below).
_NEAR = 0.8
_NAME_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def missing_requirement(requirement: str) -> str | None:
    """Why `requirement` is not met in this interpreter (None when it is).

    Args:
        requirement: a plain pip requirement, e.g. pandas==2.2.3 (checked by the spec layer).
    Returns:
        "not installed", "VERSION installed", or None.
    """
    req = Requirement(requirement)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        return None  # not for this interpreter (a python_version or platform marker)
    name = _normal(req.name)
    if name in _IMPORT_NAMES:
        return None if importlib.util.find_spec(_IMPORT_NAMES[name]) else "not installed"
    try:
        version = importlib.metadata.version(req.name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"
    if req.specifier and not req.specifier.contains(version, prereleases=True):
        return f"{version} installed"
    return None


@dataclass(frozen=True)
class Code:
    """What a script job's replicas run here: `python *entry ARGS` from `directory`.

    With `on_path` (a model factory job, spec/factory.py) the replicas run the bundled trainer
    as the image does, from the current directory, with `directory` first on PYTHONPATH."""

    directory: Path
    entry: tuple[str, ...]  # after `python`: (SCRIPT,) or ("-m", MODULE)
    requirements: tuple[str, ...] = ()
    on_path: bool = False
    # a package folder's own dependencies, and where they are declared (setup.py install_requires)
    package_requirements: tuple[str, ...] = ()
    declared_in: str | None = None


def factory_code(spec: JobSpec) -> Code:
    """A model factory job's code: image.code on the trainer's PYTHONPATH, its requirements.

    Raises:
        SpecError: the directory is missing, a requirement is malformed (exit 2).
    """
    root = code_root(spec)
    return Code(root, (), tuple(code_requirements(spec, root)), on_path=True)


def path_replicas(code: Code, replicas: list[Replica]) -> list[Replica]:
    """The replicas with code.directory first on PYTHONPATH (the image's /opt/code)."""
    out = []
    for r in replicas:
        env = dict(r.env)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(code.directory), env.get("PYTHONPATH")) if p)
        out.append(dataclasses.replace(r, env=env))
    return out


def code_of(spec: JobSpec) -> Code:
    """A script job's code, checked: image.code exists and holds the script or module.

    Args:
        spec: a script job's JobSpec (image.code with image.script or image.module).
    Returns:
        Its Code (the requirements: image.requirements, then image.code/requirements.txt; a
        package folder's own dependencies).
    Raises:
        SpecError: the directory or the entry point is missing, a requirement is malformed, a
            package folder's build backend is missing here or fails (exit 2).
    """
    root = code_root(spec)
    check_entry(spec, root)
    return _with_package(Code(root, tuple(entry_argv(spec)), tuple(code_requirements(spec, root))))


def _with_package(code: Code, folder: Path | None = None) -> Code:
    """`code` with the dependencies of its folder's own package (`folder`, default its directory)."""
    own = read_package(folder or code.directory)
    if own is None:
        return code
    return dataclasses.replace(code, package_requirements=own.requirements, declared_in=own.declared_in)


def check_requirements(code: Code, python: str = sys.executable) -> None:
    """Every requirement of `code` must be met in this interpreter: the replicas run here.

    Raises:
        SpecError: naming each unmet requirement and the pip command that installs it (exit 2).
    """
    unmet = [(r, why) for r in code.requirements if (why := missing_requirement(r))]
    declared = [(r, why) for r in code.package_requirements if (why := missing_requirement(r))]
    unmet += [(r, f"{why}; declared in {code.declared_in}") for r, why in declared if r not in dict(unmet)]
    if not unmet:
        return
    near = {r: m for r, why in unmet if why.startswith("not installed") and (m := near_installed(r))}
    names = ", ".join(
        f"{r} ({why}; did you mean {near[r][0]}? {near[r][1]} is installed)" if r in near else f"{r} ({why})"
        for r, why in unmet
    )
    command = " ".join([shlex.quote(python), "-m", "pip", "install", *(shlex.quote(r) for r in dict(unmet))])
    fix = f"install here: {command}"
    if near:
        # A misspelt name is no package to install (at best it is missing, at worst someone
        # else's): the fix is the spelling, which the image build would trip on too.
        typos = ", ".join(f"{Requirement(r).name} -> {m[0]}" for r, m in near.items())
        fix = (
            f"if misspelt, correct it where it is written ({typos}): pip would install nothing, "
            f"or another package; else {fix}"
        )
    raise SpecError(
        "image.code" if declared else "image.requirements",
        f"{names}: a local run uses this interpreter ({python}), not the image, and your code "
        "needs " + ("it" if len(unmet) == 1 else "them"),
        has_value=False,
        hint=fix,
    )


def near_installed(requirement: str) -> tuple[str, str] | None:
    """The installed distribution whose name `requirement`'s most likely misspells (numpyy,
    pandsa, scikit_lern), and its version: ("numpy", "2.4.6"); None when none is close.

    Args:
        requirement: a plain pip requirement that is not installed here.
    Returns:
        (name, version) of the closest installed distribution, or None.
    """
    wanted = _normal(Requirement(requirement).name)
    installed: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if name:
            installed.setdefault(_normal(name), dist.version)
    found = difflib.get_close_matches(wanted, list(installed), n=1, cutoff=_NEAR)
    return (found[0], installed[found[0]]) if found else None


def preflight(spec: JobSpec, python: str = sys.executable) -> Code:
    """What must hold before a script job's replicas start here (code_of, check_requirements).

    Args:
        spec: a script job's JobSpec.
        python: the interpreter the replicas run (named in the pip command).
    Returns:
        The checked Code.
    Raises:
        SpecError: exit 2, naming what is missing.
    """
    code = code_of(spec)
    check_requirements(code, python)
    return code


# Run as the replicas run (`python -m trainer.task` from the current directory, this environment):
# sys.path[0] is the current directory for `-c` as for `-m`. Importing a parent package may fail.
_FIND = """
import importlib.util, sys
try:
    found = importlib.util.find_spec(sys.argv[1]) is not None
except Exception:
    found = False
sys.exit(0 if found else 3)
"""
IMPORT_TIMEOUT_S = 300.0  # a package whose __init__ imports TensorFlow takes seconds


def importable_here(module: str, python: str = sys.executable) -> bool:
    """Can a replica started here (`python -m trainer.task` from the current directory, with this
    environment) import `module`? Asked of a process of its own, so nothing of the user's is
    imported into this one.

    Args:
        module: a dotted module name, e.g. models.net.
        python: the interpreter the replicas run.
    """
    try:
        done = subprocess.run(
            [python, "-c", _FIND, module], capture_output=True, timeout=IMPORT_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def check_factory_here(spec: JobSpec, python: str = sys.executable) -> None:
    """A model factory named with image.uri (no image.code) must be importable here: a local run
    runs the installed trainer, not the image, so the image's code is not there.

    Args:
        spec: a JobSpec whose trainer.model is package.module:function and that has no image.code.
        python: the interpreter the replicas run.
    Raises:
        SpecError: field trainer.model, naming image.uri and the fix (exit 2).
    """
    model = str(trainer_of(spec).model)
    uri = spec.image.uri if spec.image is not None else None
    module = model.split(":", 1)[0]
    if importable_here(module, python):
        return
    path = "/".join(module.split(".")) + ".py"
    raise SpecError(
        "trainer.model",
        f"names a model factory, and a local run cannot import {module!r}: image.uri "
        f"({uri}) holds it on Vertex AI, but a local run runs the installed trainer "
        f"({python}), not the image",
        value=model,
        hint=f"give image.code: DIR (the directory holding {path}) with image.repository instead of "
        "image.uri, so the local run has the code; or install the package here",
    )


def code_replicas(code: Code, replicas: list[Replica], python: str = sys.executable) -> list[Replica]:
    """The replicas of a script job, each running the code instead of the image's entrypoint.

    Args:
        code: what runs (Code).
        replicas: cluster.build_replicas of the rendered CustomJob (argv `python -m MODULE`
            then the pool's args; the environment is Vertex AI's).
        python: the interpreter to run.
    Returns:
        The same replicas, argv `python SCRIPT ARGS` or `python -m MODULE ARGS`.
    """
    # The image's command is `python -m trainer.task` locally (cluster.command_of): what follows
    # it is the pool's args, the job's (or a tuning trial's).
    return [dataclasses.replace(r, argv=(python, *code.entry, *r.argv[3:])) for r in replicas]


# -- the code inside a built artifact (the sandbox runs what was built, not the local directory) --

# templates/Dockerfile.j2 with user_code (packaging/factory.py): image.code on the trainer's path.
FACTORY_PATH_LINE = "ENV PYTHONPATH=/opt/trainer:/opt/code"
# templates/Dockerfile.code.j2 with package: image.code is a package folder, pip-installed.
PACKAGE_INSTALL_LINE = "RUN python3 -m pip install --no-cache-dir /opt/code"
_ENTRYPOINT_RE = re.compile(r"^ENTRYPOINT (\[.*\])\s*$", re.M)


def _extract(archive: bytes, dest: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")  # no absolute paths, no links out of dest


def code_in_image_context(archive: bytes, dest: Path) -> Code | None:
    """The code of a script job's build context (packaging/owncode.py's layout: Dockerfile,
    vertex-trainer/requirements.txt, code/), or of a model factory's (the bundled trainer's
    context with code/, packaging/factory.py: a Code on the trainer's path), extracted under
    `dest`; None for any other context (the bundled trainer's, a Dockerfile of your own).

    Args:
        archive: the context as uploaded (tar.gz).
        dest: an empty directory to extract into.
    Returns:
        The Code its ENTRYPOINT runs, or None.
    """
    _extract(archive, dest)
    dockerfile = dest / "Dockerfile"
    if not (dest / "code").is_dir() or not dockerfile.is_file():
        return None
    text = dockerfile.read_text(encoding="utf-8")
    if FACTORY_PATH_LINE in text:  # the bundled trainer's image with a model factory's code
        extra = dest / "trainer_image" / "requirements-extra.txt"
        lines = requirement_lines(extra.read_text(encoding="utf-8")) if extra.is_file() else []
        return Code(dest / "code", (), tuple(lines), on_path=True)
    m = _ENTRYPOINT_RE.search(text)
    if not m or "Dockerfile.code.j2" not in text:
        return None
    argv = json.loads(m.group(1))
    reqs = dest / "vertex-trainer" / "requirements.txt"
    lines = requirement_lines(reqs.read_text(encoding="utf-8")) if reqs.is_file() else []
    code = Code(dest / "code", tuple(argv[1:]), tuple(lines))
    # A package folder (templates/Dockerfile.code.j2 pip-installs /opt/code): its dependencies.
    return _with_package(code) if PACKAGE_INSTALL_LINE in text else code


def factory_in_sdist(archive: bytes, dest: Path) -> Code | None:
    """A model factory's code in the bundled trainer's sdist (vertex_trainer_task-1.0.tar.gz with
    image.code's packages beside trainer/, packaging/factory.py), extracted under `dest`: its top
    directory goes first on the trainer's PYTHONPATH. None for the trainer's sdist alone.

    Args:
        archive: the staged sdist.
        dest: an empty directory to extract into.
    Returns:
        The Code (on_path), or None.
    """
    _extract(archive, dest)
    roots = [p for p in dest.iterdir() if (p / "PKG-INFO").is_file()]
    if len(roots) != 1 or not roots[0].name.startswith("vertex_trainer_task-"):
        return None
    own = {"trainer", "pyproject.toml", "PKG-INFO", ".vertex-trainer"}
    if not [p for p in roots[0].iterdir() if p.name not in own]:
        return None
    # Its requirements are the executor image's to install (the trainer's pins among them).
    return Code(roots[0], (), (), on_path=True)


def code_in_sdist(archive: bytes, dest: Path, python_module: str) -> Code | None:
    """The code of a script job's sdist (vertex_trainer_code-1.0.tar.gz, or a package folder's
    own, built by pypa build: packaging/owncode.py), extracted under `dest`: `python -m MODULE`
    from its top directory runs what the executor image would install.

    Args:
        archive: the staged sdist.
        dest: an empty directory to extract into.
        python_module: the job's pythonPackageSpec.pythonModule.
    Returns:
        The Code, or None when the archive is not a script job's sdist.
    """
    _extract(archive, dest)
    roots = [p for p in dest.iterdir() if (p / "PKG-INFO").is_file()]
    if len(roots) != 1 or roots[0].name.startswith("vertex_trainer_task-"):
        return None
    if not roots[0].name.startswith("vertex_trainer_code-"):  # a package folder's sdist
        if not any((roots[0] / name).is_file() for name in ("setup.py", "pyproject.toml")):
            return None
        return _with_package(Code(roots[0], ("-m", python_module)))
    info = (roots[0] / "PKG-INFO").read_text(encoding="utf-8")
    reqs = [line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("Requires-Dist:")]
    return Code(roots[0], ("-m", python_module), tuple(reqs))
