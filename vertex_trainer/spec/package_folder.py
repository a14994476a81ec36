"""A code folder that is a Python package of its own: a `setup.py`, or a `pyproject.toml` that
declares a project or a build backend (docs/own-code.md, "Your own package").

Google's samples and course submit such a folder as it is (`python setup.py sdist`, then
`pythonPackageSpec`), and gcloud's autopackaging and the SDK install from it. Its name, version
and dependencies are the package's metadata as pypa `build` produces it
(`build.util.project_wheel_metadata`, the backend's `prepare_metadata_for_build_wheel`), never a
parse of setup.py: that runs the folder's own build backend, here, in a process of its own,
without build isolation (so without network: the backend, usually setuptools, must be installed
in this interpreter), as pip and gcloud run it when they build the package.
"""

from __future__ import annotations

import functools
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from vertex_trainer.errors import SpecError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10: tomli, a dependency of pypa build there
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

SETUP_FILES = ("setup.py", "pyproject.toml")


@dataclass(frozen=True)
class PackageFolder:
    """What a package folder's metadata says: `name` and `version` as the backend reads them, the
    `requirements` every install needs (Requires-Dist without an extra; a marker kept, evaluated
    where it is checked), and `declared_in`, where they were written (for messages)."""

    name: str
    version: str
    requirements: tuple[str, ...]
    declared_in: str

    @property
    def sdist_root(self) -> str:
        """The sdist's file name without .tar.gz, as `build` names it (name normalized, PEP 625)."""
        return f"{canonicalize_name(self.name).replace('-', '_')}-{self.version}"


def _pyproject(root: Path) -> dict[str, Any]:
    path = root / "pyproject.toml"
    if not path.is_file():
        return {}
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
        return data
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise SpecError(
            "image.code",
            f"holds a pyproject.toml that is not valid TOML ({e})",
            value=str(root),
            hint="fix pyproject.toml (pip could not build the package either)",
        ) from None


def package_file(root: Path) -> str | None:
    """Which file makes `root` a package folder: setup.py, or a pyproject.toml with a [project]
    or [build-system] table (one with only [tool.*] settings is not a package); None otherwise."""
    if (root / "setup.py").is_file():
        return "setup.py"
    data = _pyproject(root)
    if "project" in data or "build-system" in data:
        return "pyproject.toml"
    return None


def _declared_in(root: Path, file: str) -> str:
    project = _pyproject(root).get("project") or {}
    if "dependencies" in project and "dependencies" not in (project.get("dynamic") or ()):
        return "pyproject.toml [project].dependencies"
    if file == "setup.py":
        return "setup.py install_requires"
    if (root / "setup.cfg").is_file():
        return "setup.cfg install_requires"
    return "pyproject.toml's build backend"


def _fingerprint(root: Path) -> tuple[tuple[object, ...], ...]:
    """What the metadata depends on, for the cache: the package files' sizes and times."""
    out: list[tuple[object, ...]] = []
    for name in (*SETUP_FILES, "setup.cfg"):
        p = root / name
        st = p.stat() if p.is_file() else None
        out.append((name, st.st_size, st.st_mtime_ns) if st else (name,))
    return tuple(out)


def read_package(root: Path) -> PackageFolder | None:
    """The package folder's metadata, or None when `root` is not one (package_file).

    Args:
        root: a code folder (image.code, resolved; or its copy in a built artifact).
    Returns:
        Its PackageFolder.
    Raises:
        SpecError: the build backend is not installed here, or it failed (exit 2, naming the
            file and the backend's last line).
    """
    file = package_file(root)
    if file is None:
        return None
    return _read(root, file, _fingerprint(root))


@functools.lru_cache(maxsize=16)
def _read(root: Path, file: str, _key: tuple[tuple[object, ...], ...]) -> PackageFolder:
    # pypa build and its hook runner: ~0.1 s to import, for a package folder (setup.py,
    # pyproject.toml) only; every other spec loads without them
    import build
    import build.util
    import pyproject_hooks

    try:
        meta = build.util.project_wheel_metadata(
            root, isolated=False, runner=pyproject_hooks.quiet_subprocess_runner
        )
    except build.BuildBackendException as e:
        raise _backend_error(root, file, e) from None
    except build.BuildException as e:  # e.g. a build-system table without `requires`
        raise SpecError(
            "image.code",
            f"holds a {file} that pypa build cannot read: {e}",
            value=str(root),
            hint="fix it as `python -m build --sdist --no-isolation` would ask",
        ) from None

    reqs = []
    for text in meta.get_all("Requires-Dist") or []:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue  # the backend wrote it; pip reads it, and says so there
        if req.marker is not None and "extra" in str(req.marker):
            if not req.marker.evaluate({"extra": ""}):
                continue  # an extra's requirement: not installed by `pip install PACKAGE`
        reqs.append(str(req))
    return PackageFolder(
        str(meta["Name"]), str(meta["Version"]), tuple(dict.fromkeys(reqs)), _declared_in(root, file)
    )


def _backend_error(root: Path, file: str, e: Exception) -> SpecError:
    import pyproject_hooks  # (as _read: a package folder's only)

    cause = getattr(e, "exception", None)
    if isinstance(cause, pyproject_hooks.BackendUnavailable):
        backend = getattr(cause, "backend_name", None) or "its build backend"
        requires = _pyproject(root).get("build-system", {}).get("requires") or ["setuptools"]
        return SpecError(
            "image.code",
            f"is a package folder ({file}) whose build backend {backend} is not installed in "
            f"this interpreter ({sys.executable}): its dependencies are read without build "
            "isolation, so without network",
            value=str(root),
            # The folder's own words, pasted into a shell: each one quoted.
            hint="install it here: "
            + shlex.join([sys.executable, "-m", "pip", "install", *map(str, requires)]),
        )
    output = getattr(cause, "output", None) or b""
    text = output.decode("utf-8", "replace") if isinstance(output, bytes) else str(output)
    last = [line.strip() for line in text.splitlines() if line.strip()]
    return SpecError(
        "image.code",
        f"is a package folder ({file}) whose build backend failed to read its metadata"
        + (f": {last[-1][:300]}" if last else ""),
        value=str(root),
        hint=f"run `{sys.executable} -m build --sdist --no-isolation {root}` to see the whole error",
    )
