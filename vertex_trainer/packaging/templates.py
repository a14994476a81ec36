"""The bundled trainer's Dockerfile and .dockerignore, and what goes into its requirements layer.

- `VARIANTS`: how the image is made for GPU, CPU and TPU machines (every pin with its reason).
- `render_dockerfile` / `render_dockerignore`: the `.j2` templates in vertex_trainer/templates,
  rendered by jinja2 with StrictUndefined. Every value is validated first (the spec layer's image
  checks); as a second line of defence no value holding a line break is ever rendered.
- `write_root_files`: the repository's root Dockerfile / .dockerignore are the GPU rendering.
- `bundled_trainer_dir`, `trainer_requirements`: where the `trainer` package is, and its pip
  requirements (requirements.txt in a checkout, the `trainer` extra from an installed wheel).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertex_trainer.errors import SpecError, UserError
from vertex_trainer.spec import validate_image_reference, validate_requirement
from vertex_trainer.spec.images import requirement_lines as requirement_lines  # re-exported: plan.py

if TYPE_CHECKING:
    import jinja2

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"
_DIGEST_RE = re.compile(r"^sha256:[a-f0-9]{64}$")


@dataclass(frozen=True)
class Variant:
    """How the image is made for one kind of hardware."""

    name: str
    base_image: str
    # The framework layer, before the trainer's requirements: TensorFlow itself when the base
    # lacks it, then tf-keras matched to that TensorFlow. tf-keras goes in with --no-deps: it
    # names the `tensorflow` distribution, which would pull a second TensorFlow next to
    # tensorflow-tpu (the same reason the Makefile installs it that way).
    framework_requirements: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    keras_requirement: str = "tf-keras==2.21.0"
    # Prebuilt Vertex AI training image for image.python_package (without the region mirror),
    # and the tf-keras matching its TensorFlow.
    executor: str | None = None
    executor_keras: str | None = None
    # Reduction Server's NCCL transport plugin (scaling.reduction_server, docs/scaling.md): the
    # google-reduction-server apt package, GPU images only (source reduction-server in
    # catalog/sources.csv).
    nccl_plugin: bool = False


VARIANTS: dict[str, Variant] = {
    # Official TF image: TF 2.21.0 (the version the trainer is tested with, docs/facts.md) with the CUDA
    # 12 / cuDNN libraries it was built against, Python 3.11.
    "gpu": Variant(
        "gpu",
        "tensorflow/tensorflow:2.21.0-gpu",
        executor="vertex-ai/training/tf-gpu.2-17.py310:latest",
        executor_keras="tf-keras==2.17.0",
        nccl_plugin=True,
    ),
    # Same TF release without CUDA: a much smaller image for CPU machines.
    "cpu": Variant(
        "cpu",
        "tensorflow/tensorflow:2.21.0",
        executor="vertex-ai/training/tf-cpu.2-17.py310:latest",
        executor_keras="tf-keras==2.17.0",
    ),
    # TPU VMs need the TPU build of TF and its matching libtpu, published on the libtpu-tf index;
    # tensorflow-tpu 2.20.0 is the newest on PyPI, so tf-keras follows it (2.20.1). Python 3.11
    # to match the GPU/CPU images. No executor: Vertex AI's newest prebuilt TF TPU training image
    # (tf-tpu.2-15) is past its end of availability; python_package on TPU needs
    # image.executor_image.
    "tpu": Variant(
        "tpu",
        "python:3.11.13-slim-bookworm",
        framework_requirements=("tensorflow-tpu==2.20.0",),
        find_links=("https://storage.googleapis.com/libtpu-tf-releases/index.html",),
        keras_requirement="tf-keras==2.20.1",
    ),
}
# Where Google ships the Reduction Server plugin: the apt repository and its signing key, as the
# Vertex AI distributed-training page's Dockerfile line names them (the key kept in a keyring file
# instead of the deprecated apt-key, as Google's Cloud SDK apt instructions do).
PLUGIN_REPOSITORY = "https://packages.cloud.google.com/apt google-fast-socket main"
PLUGIN_KEY = "https://packages.cloud.google.com/apt/doc/apt-key.gpg"
# Requirement names the framework layer owns; lines naming them in the trainer's requirements
# are left to the image (or the executor image) so the variant's pins win.
FRAMEWORK_NAMES = (
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-gpu",
    "tensorflow-tpu",
    "tf-nightly",
    "tf-keras",
    "tf_keras",
)
_FRAMEWORK_RE = re.compile(
    r"^\s*(" + "|".join(map(re.escape, FRAMEWORK_NAMES)) + r")(?![A-Za-z0-9_.-])", re.IGNORECASE
)


def is_framework_requirement(line: str) -> bool:
    """Does this requirement name a TensorFlow-family distribution (owned by the framework layer)?"""
    return bool(_FRAMEWORK_RE.match(line))


# -- rendering ---------------------------------------------------------------------------------


def _finalize(value: Any) -> Any:
    # Defence in depth: validation runs before rendering, but no value that could start a new
    # Dockerfile instruction is ever written, whatever the caller forgot.
    if isinstance(value, str) and ("\n" in value or "\r" in value):
        raise UserError(f"refusing to render a value with a line break into a Dockerfile: {value!r}")
    return value


@functools.cache
def _template(name: str) -> jinja2.Template:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        finalize=_finalize,
    )
    return env.get_template(name)


def render_dockerfile(
    variant: str = "gpu",
    *,
    base_image: str | None = None,
    base_image_digest: str | None = None,
    pip_packages: Iterable[str] = (),
    user_code: bool = False,
) -> str:
    """The bundled trainer's Dockerfile for a variant (validated values only); `user_code` adds
    the context's code/ (a model factory's image.code) on PYTHONPATH."""
    v = VARIANTS[variant]
    base = base_image or v.base_image
    validate_image_reference("image.base_image", base, require_pin=not base_image_digest)
    if base_image_digest:
        if not _DIGEST_RE.match(base_image_digest):
            raise SpecError(
                "image.base_image_digest",
                "is not sha256:<64 hex>; refused before it could reach a Dockerfile or a shell",
                value=base_image_digest,
                hint="sha256:<64 hex digits>",
            )
        base = f"{base}@{base_image_digest}"
    reqs = [validate_requirement(f"image.pip_packages[{i}]", r) for i, r in enumerate(pip_packages)]
    return _template("Dockerfile.j2").render(
        variant=v.name,
        base_image=base,
        framework_requirements=list(v.framework_requirements),
        find_links=list(v.find_links),
        keras_requirement=v.keras_requirement,
        framework_names=list(FRAMEWORK_NAMES),
        extra_requirements=bool(reqs),
        user_code=user_code,
        nccl_plugin=v.nccl_plugin,
        plugin_repository=PLUGIN_REPOSITORY,
        plugin_key=PLUGIN_KEY,
    )


def render_dockerignore(*, user_code: bool = False) -> str:
    """The bundled context's .dockerignore (an allowlist, then what must never enter an image);
    `user_code` allows code/ (a model factory's image.code) too."""
    return _template("dockerignore.j2").render(user_code=user_code)


def write_root_files(repo_root: Path) -> None:
    """The repository's Dockerfile and .dockerignore are the GPU rendering of the templates."""
    (repo_root / "Dockerfile").write_text(render_dockerfile("gpu"))
    (repo_root / ".dockerignore").write_text(render_dockerignore())


# -- the trainer package and its requirements --------------------------------------------------


def bundled_trainer_dir() -> Path:
    """The `trainer` package shipped with vertex-trainer (trainer_image/trainer in the repo)."""
    spec = importlib.util.find_spec("trainer")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        if Path(loc, "task.py").is_file() or Path(loc, "__init__.py").is_file():
            return Path(loc)
    raise UserError(
        "the bundled trainer package (`trainer`) is not installed",
        hint="reinstall vertex-trainer, or set image.context to a directory with a Dockerfile",
    )


def trainer_requirements(trainer_dir: Path) -> bytes:
    """The trainer's pip requirements (besides TensorFlow): trainer_image/requirements.txt in a
    source checkout; from an installed wheel, where that file does not travel, the `trainer` extra
    of the vertex-trainer distribution minus the TensorFlow family (the image brings its own).
    The two hold the same requirements (tests/house/test_house_wheel.py), so an installed copy
    builds the same image; its tag differs from a checkout's, the file's text being another."""
    # The parent's file only in a checkout's layout: an installed trainer's parent is
    # site-packages, where any distribution may have dropped a requirements.txt.
    in_checkout = trainer_dir.parent.name == "trainer_image"
    for candidate in (trainer_dir.parent / "requirements.txt", trainer_dir / "requirements.txt"):
        if candidate.is_file() and (in_checkout or candidate.parent == trainer_dir):
            return candidate.read_bytes()

    try:
        declared = importlib.metadata.requires("vertex-trainer") or []
    except importlib.metadata.PackageNotFoundError:
        declared = []
    lines = []
    for item in declared:
        req, _, marker = item.partition(";")
        req = req.replace(" ", "")
        if re.search(r"""extra\s*==\s*['"]trainer['"]""", marker) and not is_framework_requirement(req):
            lines.append(validate_requirement("vertex-trainer[trainer]", req))
    if not lines:
        raise UserError(
            f"the trainer's requirements.txt was not found next to {trainer_dir}",
            hint="install vertex-trainer from a source checkout (pip install -e .)",
        )
    return (
        "# generated from the vertex-trainer[trainer] extra (no requirements.txt found)\n"
        + "".join(f"{line}\n" for line in lines)
    ).encode()
