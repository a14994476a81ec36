"""The type checker's configuration stays honest (issue 31): the "not strict yet" allowlist in
pyproject.toml names only modules that exist, so it can only shrink and never silently holds a
dead name; nothing of ours is ignored wholesale; every `# type: ignore` names its error code."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
# mypy's packages, and where each one's source lives (the trainer is installed as `trainer`).
SOURCES = {"vertex_trainer": ROOT / "vertex_trainer", "trainer": ROOT / "trainer_image" / "trainer"}


def _mypy() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


def _allowlist() -> list[str]:
    """The module names of the override that turns strictness off (the "not strict yet" list)."""
    lists = [_modules(o) for o in _mypy().get("overrides", []) if o.get("disallow_untyped_defs") is False]
    assert len(lists) == 1, "one override relaxes strictness: the allowlist"
    return lists[0]


def _modules(override: dict) -> list[str]:
    return [override["module"]] if isinstance(override["module"], str) else list(override["module"])


def _exists(name: str) -> bool:
    """A module (a.b -> a/b.py or a/b/__init__.py), or a package for a.b.* (a/b/__init__.py)."""
    top, _, rest = name.removesuffix(".*").partition(".")
    if top not in SOURCES:
        return False
    path = SOURCES[top].joinpath(*rest.split(".")) if rest else SOURCES[top]
    if name.endswith(".*"):
        return (path / "__init__.py").is_file()
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_the_strict_allowlist_names_only_modules_that_exist():
    dead = [name for name in _allowlist() if not _exists(name)]
    assert dead == [], f"remove these from the 'not strict yet' list in pyproject.toml: {dead}"


def test_every_module_of_ours_in_an_override_exists():
    named = [m for o in _mypy().get("overrides", []) for m in _modules(o) if m.split(".")[0] in SOURCES]
    assert [m for m in named if not _exists(m)] == []


def test_the_strict_allowlist_names_each_module_once():
    names = _allowlist()
    packages = {n.removesuffix(".*") for n in names if n.endswith(".*")}
    covered = [n for n in names if not n.endswith(".*") and any(n.startswith(p + ".") for p in packages)]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    assert (duplicates, covered) == ([], []), "listed twice, or inside a package listed with .*"


def test_the_strict_allowlist_is_not_the_whole_package():
    assert not {"vertex_trainer", "vertex_trainer.*", "trainer", "trainer.*"} & set(_allowlist())


def test_nothing_of_ours_is_ignored_wholesale():
    config = _mypy()
    assert not config.get("ignore_errors"), "no global ignore_errors"
    for override in config.get("overrides", []):
        ours = [m for m in _modules(override) if m.split(".")[0] in SOURCES]
        if ours:
            assert not override.get("ignore_errors"), f"ignore_errors for {ours}"
            assert override.get("follow_imports") not in ("skip", "silent"), f"follow_imports for {ours}"


def test_every_type_ignore_names_its_error_code():
    bare = re.compile(r"#\s*type:\s*ignore(?!\[)")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for source in SOURCES.values()
        for path in sorted(source.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if bare.search(line)
    ]
    assert found == [], "write # type: ignore[code] with the reason, or fix the type"
