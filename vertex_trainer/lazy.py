"""The optional libraries, named once, imported on first use (SkyPilot's `adaptors.common.LazyImport`).

Heavy or optional libraries are never imported at module level in host code: `vertex-trainer
--help` and `validate` stay light, and a missing extra is one clear message (exit 2) naming what
needs it and the one command that installs it, instead of an ImportError traceback:

    kfp = lazy.module("kfp")            # nothing imported yet
    kfp.dsl.pipeline(...)               # imported here, or UserError "install vertex-trainer[pipelines]"
    compiler = lazy.require("kfp.compiler")

`LIBRARIES` is the one table of them: the import name, the distribution, the vertex-trainer extra
that installs it (pyproject.toml [project.optional-dependencies]) and what needs it.

The message's `pip install 'vertex-trainer[EXTRA]'` works wherever the tool runs, although the
package is on no registry: pip takes the installed vertex-trainer (a clone's, a wheel's, a git
URL's) as the one satisfying the name and installs only the extra's libraries. A first install
names the source instead (README.md, "Install").
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from vertex_trainer.errors import UserError

__all__ = [
    "LIBRARIES",
    "LazyModule",
    "Library",
    "available",
    "library_of",
    "missing",
    "module",
    "require",
    "version",
]


@dataclass(frozen=True)
class Library:
    """One optional library: `name` (its import name), `distribution` (its pip name), `extra`
    (the vertex-trainer extra that installs it; None when it is not in one) and `purpose` (what
    needs it, in messages)."""

    name: str
    distribution: str
    extra: str | None
    purpose: str
    command: str | None = None  # how to install it, when neither an extra nor a plain pip install

    @property
    def install(self) -> str:
        """The command that installs it."""
        if self.command:
            return self.command
        if self.extra:
            return f"pip install 'vertex-trainer[{self.extra}]' (make installs every extra)"
        return f"pip install {self.distribution}"


LIBRARIES: dict[str, Library] = {
    lib.name: lib
    for lib in (
        Library("kfp", "kfp", "pipelines", "compiling a Vertex AI pipeline"),
        Library(
            "google_cloud_pipeline_components",
            "google-cloud-pipeline-components",
            "pipelines",
            "compiling a Vertex AI pipeline",
        ),
        Library("apache_beam", "apache-beam", "data", "data convert"),
        Library("functions_framework", "functions-framework", "trigger", "the storage-event trigger"),
        Library(
            "google.cloud.aiplatform",
            "google-cloud-aiplatform",
            None,
            "to_sdk() (the google-cloud-aiplatform SDK)",
        ),
        Library("tensorflow", "tensorflow-cpu", "trainer", "running the trainer on this machine"),
        # Not in the trainer extra: tf-keras names the `tensorflow` distribution, and its
        # dependencies would install a second TensorFlow beside tensorflow-cpu. The version is
        # the Makefile's TF_KERAS (tests/house/test_house_wheel.py keeps them equal).
        Library(
            "tf_keras",
            "tf-keras",
            None,
            "running the trainer on this machine",
            command="pip install --no-deps tf-keras==2.21.0 (after the trainer extra; --no-deps: "
            "its dependencies would install a second TensorFlow; make installs it so)",
        ),
        Library("hypertune", "cloudml-hypertune", "trainer", "a local tuning run (each trial's metric)"),
        Library("matplotlib", "matplotlib", "report", "vertex-trainer report (its plots)"),
        Library("xprof", "xprof", "profile", "vertex-trainer profile (reading the profiler trace)"),
        Library("tensorboard", "tensorboard", "profile", "vertex-trainer tensorboard"),
        Library(
            "gcp_storage_emulator",
            "gcp-storage-emulator",
            "sandbox",
            "the Cloud Storage emulator (dev sandbox, dev gcs-emulator)",
        ),
    )
}


def library_of(name: str) -> Library:
    """The library an import name belongs to (`kfp.dsl` -> kfp). KeyError for one not listed."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        found = LIBRARIES.get(".".join(parts[:n]))
        if found:
            return found
    raise KeyError(f"{name!r} is not an optional library of vertex-trainer (lazy.LIBRARIES)")


def missing(name: str, purpose: str | None = None, *, absent: str | None = None) -> UserError:
    """The one "not installed" error (exit 2) for the library of `name`.

    Args: name: an import name of a listed library (or a module inside one); purpose: what
    needs it (default: the table's); absent: the module that failed to import, when another.
    Returns: the UserError, to raise."""
    lib = library_of(name)
    what = f"{lib.distribution} is not installed here"
    if absent and absent.split(".")[0] != lib.name.split(".")[0]:
        try:  # another listed library it needs, e.g. kfp under the pipeline components
            lib, what = library_of(absent), f"{library_of(absent).distribution} is not installed here"
        except KeyError:
            what = f"{lib.distribution} cannot be imported here ({absent} is missing)"
    return UserError(f"{purpose or lib.purpose} needs {lib.distribution}: {what}", hint=lib.install)


def require(name: str, purpose: str | None = None) -> ModuleType:
    """Import `name` (a listed library or a module inside it) now.

    Args: name: e.g. "kfp.compiler"; purpose: what needs it, for the message.
    Returns: the module. Raises UserError (exit 2, `missing`) when it cannot be imported."""
    library_of(name)  # a typo here is a bug, not a missing extra
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise missing(name, purpose, absent=exc.name) from None


def available(name: str) -> bool:
    """Whether `name` (a listed library) is installed, without importing it."""
    library_of(name)
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def version(distribution: str) -> str:
    """The installed version of a distribution; `missing` (exit 2) for a listed library's
    distribution that is not installed, PackageNotFoundError for any other."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        for lib in LIBRARIES.values():
            if lib.distribution == distribution:
                raise missing(lib.name) from None
        raise


class LazyModule:
    """A module imported on first attribute access (`require`): `kfp = LazyModule("kfp")`."""

    def __init__(self, name: str, purpose: str | None = None):
        library_of(name)
        self._name, self._purpose = name, purpose
        self._module: ModuleType | None = None

    def load(self) -> ModuleType:
        """Import the module now (once). Returns: the module."""
        if self._module is None:
            self._module = require(self._name, self._purpose)
        return self._module

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self.load(), attr)

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not imported yet"
        return f"LazyModule({self._name!r}, {state})"


def module(name: str, purpose: str | None = None) -> LazyModule:
    """`LazyModule(name, purpose)`: bind a library at module level, import it on first use."""
    return LazyModule(name, purpose)
