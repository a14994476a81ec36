"""A script job run here (`submit --local`): your code from image.code, as Vertex AI runs it.

Each replica runs `python SCRIPT ARGS` (or `python -m MODULE ARGS`) with image.code as its
working directory, as the generated image's ENTRYPOINT does from /opt/code; cluster.py gives it
the environment Vertex AI sets (AIP_* directories, CLUSTER_SPEC, TF_CONFIG, the spec's env).
Before anything starts, `preflight` checks what would otherwise end as a traceback in a
replica's log: the directory, the script or module, and every requirement, in this interpreter.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from vertex_trainer.errors import SpecError
from vertex_trainer.local.cluster import Replica
from vertex_trainer.spec.images import check_entry, code_requirements, code_root, entry_argv

# Requirements the local TensorFlow satisfies whatever its distribution is called (tensorflow-cpu
# here stands in for the image's tensorflow; tf-keras is the Keras 2 of that TensorFlow).
_IMPORT_NAMES = {
    "tensorflow": "tensorflow",
    "tensorflow-cpu": "tensorflow",
    "tensorflow-gpu": "tensorflow",
    "tensorflow-tpu": "tensorflow",
    "tf-keras": "tf_keras",
}
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
    from packaging.requirements import Requirement  # pip's own parser: a dependency of pytest and pip

    req = Requirement(requirement)
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


def preflight(spec: Any, python: str = sys.executable) -> Path:
    """What must hold before a script job's replicas start here.

    Args:
        spec: a script job's JobSpec (image.code with image.script or image.module).
        python: the interpreter the replicas run (named in the pip command).
    Returns:
        image.code, resolved: the replicas' working directory.
    Raises:
        SpecError: the directory or the entry point is missing, or a requirement is not met
            here (exit 2, naming it and the pip command that installs it).
    """
    root = code_root(spec)
    check_entry(spec, root)
    unmet = [(r, why) for r in code_requirements(spec, root) if (why := missing_requirement(r))]
    if unmet:
        names = ", ".join(f"{r} ({why})" for r, why in unmet)
        command = " ".join(
            [shlex.quote(python), "-m", "pip", "install", *(shlex.quote(r) for r in dict(unmet))]
        )
        raise SpecError(
            "image.requirements",
            f"{names}: a local run uses this interpreter ({python}), not the image, and your code "
            "needs " + ("it" if len(unmet) == 1 else "them"),
            has_value=False,
            hint=f"install here: {command}",
        )
    return root


def script_replicas(spec: Any, replicas: list[Replica], python: str = sys.executable) -> list[Replica]:
    """The replicas of a script job, each running your code instead of the image's entrypoint.

    Args:
        spec: the script job.
        replicas: cluster.build_replicas of its rendered CustomJob (argv `python -m MODULE`
            then the pool's args; the environment is Vertex AI's).
        python: the interpreter to run.
    Returns:
        The same replicas, argv `python SCRIPT ARGS` or `python -m MODULE ARGS`.
    """
    entry = entry_argv(spec)
    # The image's command is `python -m trainer.task` locally (cluster.command_of): what follows
    # it is the pool's args, the job's (or a tuning trial's).
    return [dataclasses.replace(r, argv=(python, *entry, *r.argv[3:])) for r in replicas]
