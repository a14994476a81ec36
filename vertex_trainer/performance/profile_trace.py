"""Where a run's profiler traces are, and copies of one to read (performance/step_profile.py reads them).

TensorFlow's profiler writes one XSpace per host and session below a TensorBoard folder:

    <TensorBoard dir>/plugins/profile/<session: YYYY_MM_DD_HH_MM_SS>/<host>.xplane.pb

`find_local` walks a local folder, `find_gcs` lists a gs:// prefix through the project's storage
client (the sandbox's emulator when the settings point at it); both take the newest session.
`fetch` copies its files into a scratch folder: xprof writes its caches beside what it reads, and a
run's folder is left as it was. `run_config` reads the bundled trainer's trainer_config.json.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertex_trainer.errors import UserError
from vertex_trainer.gcp import storage
from vertex_trainer.settings import Settings
from vertex_trainer.sizes import human_size

__all__ = [
    "NO_TRACE_HINT",
    "TRACE_SUFFIX",
    "Trace",
    "fetch",
    "find_gcs",
    "find_local",
    "no_trace",
    "run_config",
]

NO_TRACE_HINT = (
    'profile some steps: set trainer.profile_steps: "A,B" in the spec (e.g. "10,20") and run '
    "it again; a script of yours: tf.profiler.experimental.start(LOGDIR)/stop() around a few "
    "steps, or Keras' TensorBoard(log_dir, profile_batch=(10, 20))"
)
TRACE_SUFFIX = ".xplane.pb"
# <anything>/plugins/profile/<session>/<host>.xplane.pb
_TRACE = re.compile(r"(?:^|/)plugins/profile/([^/]+)/([^/]+)\.xplane\.pb$")
MAX_LISTED = 20_000  # entries looked at below a folder or prefix before giving up
MAX_TRACE_BYTES = 2 << 30  # a session's files, together
TRAINER_CONFIG = "trainer_config.json"  # the bundled trainer's resolved run, beside its outputs


@dataclass(frozen=True)
class Trace:
    """One profiler session found: its folder (local path or gs:// URI), its name and its files
    (one per host)."""

    folder: str
    session: str
    files: tuple[str, ...]

    @property
    def hosts(self) -> list[str]:
        return [os.path.basename(f)[: -len(TRACE_SUFFIX)] for f in self.files]


def no_trace(where: str) -> UserError:
    """The exit-2 answer when `where` holds no profiler trace."""
    return UserError(
        f"profile: no TensorFlow profiler trace (plugins/profile/*/*{TRACE_SUFFIX}) under {where}",
        hint=NO_TRACE_HINT,
    )


def _newest(found: Mapping[tuple[str, str], list[str]], where: str) -> Trace:
    if not found:
        raise no_trace(where)
    (folder, session) = max(found, key=lambda key: (key[1], key[0]))
    return Trace(folder, session, tuple(sorted(found[(folder, session)])))


def find_local(root: str | os.PathLike[str]) -> Trace:
    """The newest profiler session below a local folder (walked, at most MAX_LISTED entries).

    Args:
        root: a run's folder, its TensorBoard folder, or any folder above a trace.
    Returns:
        the Trace. Raises UserError (exit 2, `no_trace`) when there is none.
    """
    base = Path(root)
    found: dict[tuple[str, str], list[str]] = {}
    seen = 0
    for folder, dirs, files in os.walk(base):
        seen += len(dirs) + len(files)
        if seen > MAX_LISTED:
            break
        dirs.sort()
        parent = Path(folder)
        if parent.parent.name == "profile" and parent.parent.parent.name == "plugins":
            for name in files:
                if name.endswith(TRACE_SUFFIX):
                    found.setdefault((str(parent), parent.name), []).append(str(parent / name))
    return _newest(found, str(base))


def find_gcs(settings: Settings, uri: str) -> Trace:
    """The newest profiler session below a gs:// prefix, listed through the project's storage
    client (the sandbox's emulator when the settings point at it).

    Args:
        settings: the process settings (the storage endpoint).
        uri: gs://bucket/prefix (a job's base output directory, or its logs).
    Returns:
        the Trace (its files are gs:// URIs). Raises UserError (exit 2) when there is none.
    """
    bucket, prefix = storage.split_uri(uri.rstrip("/"))
    prefix = f"{prefix}/" if prefix else ""
    found: dict[tuple[str, str], list[str]] = {}
    for blob in storage.client(settings).list_blobs(bucket, prefix=prefix, max_results=MAX_LISTED):
        match = _TRACE.search(blob.name)
        if match:
            folder = f"gs://{bucket}/{blob.name.rsplit('/', 1)[0]}"
            found.setdefault((folder, match.group(1)), []).append(f"gs://{bucket}/{blob.name}")
    return _newest(found, uri)


def fetch(trace: Trace, scratch: Path, settings: Settings | None) -> list[str]:
    """Copies of the trace's files in `scratch` (xprof writes caches beside what it reads): at most
    MAX_TRACE_BYTES together, counted before a byte past it is read (a gs:// object is read only
    that far; a local file's size is looked at first), and a local one only a regular file (a FIFO
    was a traceback, a link to /dev/zero a copy without end). UserError (exit 2) otherwise."""
    copies, total = [], 0
    for source in trace.files:
        target = scratch / os.path.basename(source)
        left = MAX_TRACE_BYTES - total
        if source.startswith("gs://"):
            if settings is None:
                raise ValueError("a gs:// trace needs the settings (the storage endpoint)")
            data = storage.read_bytes(settings, source, left)
            if data is None:
                raise no_trace(trace.folder)
            if len(data) > left:
                raise _too_big(trace)
            target.write_bytes(data)
        else:
            try:
                st = os.stat(source)
            except OSError as e:
                raise UserError(f"profile: {source}: {e.strerror or e}") from None
            if not stat.S_ISREG(st.st_mode):
                raise UserError(
                    f"profile: {source} is not a regular file (a trace's files are)",
                    hint="profile a folder whose plugins/profile/ holds the profiler's own files",
                )
            if st.st_size > left:
                raise _too_big(trace)
            shutil.copyfile(source, target)
        total += target.stat().st_size
        if total > MAX_TRACE_BYTES:  # (a file that grew while it was copied)
            raise _too_big(trace)
        copies.append(str(target))
    return copies


def _too_big(trace: Trace) -> UserError:
    return UserError(
        f"profile: the trace in {trace.folder} is over {human_size(MAX_TRACE_BYTES)}",
        hint="profile fewer steps (trainer.profile_steps), or open it in TensorBoard's "
        "Profile tab (vertex-trainer tensorboard RUN)",
    )


def run_config(folder: str, settings: Settings) -> dict[str, Any]:
    """The bundled trainer's trainer_config.json in `folder` (a local path or gs://): its
    steps_per_execution and steps_per_epoch feed the verdict; {} when there is none (a script
    job) or it cannot be read."""
    path = f"{folder.rstrip('/')}/{TRAINER_CONFIG}"
    config: Any = None
    try:
        if path.startswith("gs://"):
            config = storage.read_json(settings, path)
        elif os.path.getsize(path) <= 1 << 20:
            config = json.loads(Path(path).read_text(encoding="utf-8"))
    except Exception:  # unreadable: the steps' numbers tell steps_per_execution instead
        return {}
    return config if isinstance(config, dict) else {}
