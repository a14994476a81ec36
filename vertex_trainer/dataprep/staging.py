"""The code Dataflow workers need, as one small wheel staged with the job (`--extra_package`).

vertex-trainer is not on a public index, and the workers need only the pipeline's own modules
(`WORKER_MODULES`: standard library, apache_beam, Pillow, google-crc32c), not the CLI and its
dependencies. So the launcher writes a pure-Python wheel, `vertex_trainer_dataprep_worker`,
holding those modules as they are installed here, with Pillow pinned to the launcher's version
(re-encoded images then come out byte-identical on the DirectRunner and on Dataflow). Beam
uploads it to the staging location and every worker pip-installs it at start; nothing is built
on the workers and no setuptools or `build` is needed here.

The wheel is a zip with fixed timestamps: the same code gives the same bytes.
"""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from importlib import metadata
from pathlib import Path

DIST = "vertex_trainer_dataprep_worker"
WORKER_MODULES = ("__init__.py", "records.py", "images.py", "pipeline.py")
_EPOCH = (1980, 1, 1, 0, 0, 0)
_TOP_INIT = (
    '"""vertex_trainer on a Dataflow worker: only vertex_trainer.dataprep\'s worker modules '
    '(vertex-trainer data convert)."""\n'
)


def _version(dist: str, default: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return default


def requirements() -> list[str]:
    """What the worker wheel requires (apache-beam comes with the worker's container)."""
    return [f"Pillow=={_version('Pillow', '12.0.0')}", "google-crc32c>=1.5"]


def wheel_name() -> str:
    return f"{DIST}-{_version('vertex-trainer', '0.0.0')}-py3-none-any.whl"


def _files() -> dict[str, bytes]:
    here = Path(__file__).resolve().parent
    files = {"vertex_trainer/__init__.py": _TOP_INIT.encode()}
    for name in WORKER_MODULES:
        files[f"vertex_trainer/dataprep/{name}"] = (here / name).read_bytes()
    return files


def build_wheel(dest_dir: str | Path) -> Path:
    """Write the worker wheel into `dest_dir`; returns its path."""
    version = _version("vertex-trainer", "0.0.0")
    info = f"{DIST}-{version}.dist-info"
    files = _files()
    files[f"{info}/METADATA"] = "\n".join(
        [
            "Metadata-Version: 2.1",
            f"Name: {DIST}",
            f"Version: {version}",
            "Summary: vertex-trainer data convert: the Beam pipeline's worker modules",
            *(f"Requires-Dist: {r}" for r in requirements()),
            "",
        ]
    ).encode()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: vertex-trainer\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    files[f"{info}/top_level.txt"] = b"vertex_trainer\n"
    record = io.StringIO()
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.write(f"{name},sha256={digest},{len(data)}\n")
    record.write(f"{info}/RECORD,,\n")
    files[f"{info}/RECORD"] = record.getvalue().encode()

    path = Path(dest_dir) / wheel_name()
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            entry = zipfile.ZipInfo(name, _EPOCH)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(entry, data)
    return path
