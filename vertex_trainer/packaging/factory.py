"""A model factory job's image: the bundled trainer's, with image.code in it (docs/own-code.md).

`trainer.model: package.module:function` with `image.code: DIR` (and no image.script / module)
runs the bundled trainer on your Keras model (spec/factory.py). Its build context is the bundled
trainer's (packaging/plan.py `plan_bundled_context`) plus DIR under `code/`, which the
Dockerfile copies to /opt/code and puts on PYTHONPATH after the trainer; image.requirements and
DIR/requirements.txt join the image's extra requirements. DIR's files are in the content hash,
so a changed factory is a new tag and an unchanged one is not rebuilt; DIR's own .dockerignore
is honoured and caches never count (packaging/owncode.py `code_entries`). With
image.python_package, DIR's packages and modules sit at the top of the trainer's sdist and are
installed beside it on the executor image.
"""

from __future__ import annotations

from typing import Any

from vertex_trainer.packaging.context import ContextEntry
from vertex_trainer.packaging.owncode import code_entries
from vertex_trainer.spec.images import code_requirements, code_root

CODE_PREFIX = "code/"  # image.code inside the build context (COPY code/ /opt/code/)


def factory_files(spec: Any, *, package: bool = False) -> tuple[list[ContextEntry], list[str]]:
    """(image.code's files, its requirements) for a factory job's build context or sdist.

    Args:
        spec: a factory job's JobSpec (spec.factory.runs_factory).
        package: for the sdist (image.python_package): the files at its top, beside trainer/,
            without the directory's own packaging files (the sdist's are generated).
    Returns:
        The entries (under code/ for an image) and the requirement strings (image.requirements,
        then DIR/requirements.txt).
    Raises:
        SpecError: the directory is missing or a requirement is malformed (exit 2).
    """
    root = code_root(spec)
    requirements = code_requirements(spec, root)
    if not package:
        return code_entries(spec, root, prefix=CODE_PREFIX), requirements
    return [e for e in code_entries(spec, root) if e.name not in SDIST_OWN], requirements


# Top-level names of the sdist that vertex-trainer writes itself (a directory's own are left out).
SDIST_OWN = ("pyproject.toml", "PKG-INFO", "setup.py", "setup.cfg", "MANIFEST.in", "requirements.txt")


def top_level(entries: list[ContextEntry]) -> tuple[list[str], list[str]]:
    """(top-level packages, top-level modules) of files laid out at an sdist's top, for
    setuptools' packages.find include list and py-modules."""
    packages = sorted({e.name.split("/", 1)[0] for e in entries if "/" in e.name and e.name.endswith(".py")})
    modules = sorted(e.name[:-3] for e in entries if "/" not in e.name and e.name.endswith(".py"))
    return packages, modules
