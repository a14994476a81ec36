"""A model factory job's image: the bundled trainer's, with image.code in it (docs/own-code.md).

`trainer.model: package.module:function` with `image.code: DIR` (and no image.script / module)
runs the bundled trainer on your Keras model (spec/factory.py). Its build context is the bundled
trainer's (packaging/plan.py `plan_bundled_context`) plus DIR under `code/`, which the
Dockerfile copies to /opt/code and puts on PYTHONPATH after the trainer; image.requirements and
DIR/requirements.txt join the image's extra requirements. DIR's files are in the content hash,
so a changed factory is a new tag and an unchanged one is not rebuilt; DIR's own .dockerignore
is honoured and caches never count (packaging/owncode.py `code_entries`).
"""

from __future__ import annotations

from typing import Any

from vertex_trainer.packaging.context import ContextEntry
from vertex_trainer.packaging.owncode import code_entries
from vertex_trainer.spec.images import code_requirements, code_root

CODE_PREFIX = "code/"  # image.code inside the build context (COPY code/ /opt/code/)


def factory_files(spec: Any) -> tuple[list[ContextEntry], list[str]]:
    """(image.code's files under code/, its requirements) for a factory job's build context.

    Args:
        spec: a factory job's JobSpec (spec.factory.runs_factory).
    Returns:
        The context entries and the requirement strings (image.requirements, then
        DIR/requirements.txt).
    Raises:
        SpecError: the directory is missing or a requirement is malformed (exit 2).
    """
    root = code_root(spec)
    return code_entries(spec, root, prefix=CODE_PREFIX), code_requirements(spec, root)
