"""`help(vt.submit)` in a notebook is the reference: every public function of the Python API
(vertex_trainer.api, and what `vertex_trainer` re-exports) names each argument under Args: and
says what it returns under Returns: (python-aiplatform's docstring layout)."""

from __future__ import annotations

import inspect
import re

import pytest

import vertex_trainer
from vertex_trainer import api


def _public_callables():
    seen = {}
    for module in (api, vertex_trainer):
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj):
                seen[f"{obj.__module__}.{obj.__qualname__}"] = obj
            elif inspect.isclass(obj) and obj.__module__.startswith("vertex_trainer.api"):
                for attr, member in vars(obj).items():
                    if isinstance(member, classmethod):
                        member = member.__func__
                    if inspect.isfunction(member) and not attr.startswith("_") and attr != "to_dict":
                        seen[f"{obj.__module__}.{obj.__qualname__}.{attr}"] = member
    return sorted(seen.items())


def _documented(doc: str, section: str) -> str:
    """The text of one Google-style section (Args:, Returns:) of `doc`, or ""."""
    match = re.search(rf"^\s*{section}:\s*$(.*?)(?=^\s*[A-Z][a-z]+:\s*$|\Z)", doc, re.M | re.S)
    return match[1] if match else ""


@pytest.mark.parametrize(
    "qualname,function", _public_callables(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_public_api_function_documents_each_argument_and_its_result(qualname, function):
    doc = inspect.getdoc(function) or ""
    params = [p for p in inspect.signature(function).parameters.values() if p.name not in ("self", "cls")]
    args = _documented(doc, "Args")
    missing = [p.name for p in params if not re.search(rf"^\s*\**{re.escape(p.name)}:", args, re.M)]
    assert not missing, f"{qualname}: Args: does not name {missing}"
    assert _documented(doc, "Returns").strip(), f"{qualname}: no Returns: section"


def test_the_api_is_covered_by_the_check():
    """The check above really walks the API (a renamed __all__ would make it vacuous)."""
    names = [q for q, _ in _public_callables()]
    assert "vertex_trainer.api.execute.submit" in names and "vertex_trainer.api.bench.bench" in names
    assert "vertex_trainer.api.plan.plan_submit" in names
    assert "vertex_trainer.api.handles.Job.get" in names and len(names) >= 20
