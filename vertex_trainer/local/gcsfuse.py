"""/gcs/BUCKET/ for local replicas, as Cloud Storage FUSE gives it on Vertex AI (issue 32 item 4).

On Vertex AI every bucket is mounted at /gcs/BUCKET/, and Google's samples read their data and
write their model there (they turn AIP_MODEL_DIR's gs:// into /gcs/). Here, each replica of a
script job runs in a mount namespace of its own (`unshare --mount`) in which a stand-in directory
is bind-mounted at /gcs: the replicas of one run share it, and no other process on the machine
sees it. The stand-in is a bucket kept as a directory tree, `<stand-in>/BUCKET/path`: for a run
whose output directory is local it is `<output_dir>/.vertex-trainer/gcs/`, shared by the runs below
output_dir as a bucket would be, and stays there; for a run
that writes to Cloud Storage (gs:// output_dir, e.g. in `dev sandbox`) it is a scratch directory.

Before the replicas start, the objects under every /gcs/BUCKET/PATH the replicas are given (spec
args and env) are fetched from the bucket in use (the emulator, or Cloud Storage with
credentials) into the stand-in, at most 10,000 objects and 1 GiB per run (above: exit 2), so
reads see them (local/gcsfill.py says exactly what is fetched, kept and refused). Objects the
script finds by other means (a path it builds itself) are not fetched. When a gs:// run ends,
`upload` sends every file of the stand-in to gs://BUCKET/path except those fetched and left
unchanged (same size and mtime), so only what the run wrote or changed is uploaded, where Vertex
AI would have put it. A fetched file the run deleted (`deleted`) is deleted from its bucket, as
the mount would have, unless the object changed in the bucket since it was fetched.

What it needs: root (a bind mount needs CAP_SYS_ADMIN, and /gcs, an empty mount point, must exist
on the root filesystem: it is created when missing) and util-linux's `unshare`. Without them
`unavailable()` says why, and a run that names /gcs/ paths is refused before it starts
(cluster.check_fuse). Other ways considered: a FUSE filesystem over the bucket needs a FUSE
library in every environment; rewriting paths inside Python misses TensorFlow's C++ file I/O.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

MOUNT_POINT = "/gcs"
# Ends the stand-in file of an object whose name is also a folder of others, as Cloud Storage FUSE
# names it (its semantics page, "Name conflicts"); no object name holds a line feed.
CONFLICT_SUFFIX = "\n"
# $0 is the stand-in, "$@" the replica's argv: the shell only mounts, then becomes the replica.
_MOUNT_THEN_RUN = f'mount --bind "$0" {MOUNT_POINT} && exec "$@"'


class Unchanged(Protocol):
    """A file as it was fetched into the stand-in (gcsfill.Fetched)."""

    @property
    def generation(self) -> str: ...

    def same_file(self, path: Path) -> bool: ...


@functools.cache
def unavailable() -> str | None:
    """Why replicas cannot have /gcs here (None: they can). Probed once per process."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return "util-linux's unshare is not installed"
    if os.geteuid() != 0:
        return "a bind mount at /gcs needs root"
    try:
        os.makedirs(MOUNT_POINT, exist_ok=True)
    except OSError as exc:
        return f"cannot create the mount point {MOUNT_POINT}: {exc.strerror}"
    # A directory of its own: parallel trials' threads can probe at once (functools.cache does not
    # lock), and one's rmdir must not pull another's mount source away.
    probe = Path(tempfile.mkdtemp(prefix="vertex-trainer-gcs-probe-"))
    try:
        done = subprocess.run(
            wrap(["true"], str(probe)), capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unshare failed: {exc}"
    finally:
        probe.rmdir()
    if done.returncode != 0:
        return f"a private mount namespace is not allowed here: {done.stderr.strip()[:200]}"
    return None


def wrap(argv: list[str] | tuple[str, ...], standin: str) -> list[str]:
    """`argv` run with `standin` bind-mounted at /gcs, in a mount namespace of its own."""
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "--",
        "/bin/sh",
        "-c",
        _MOUNT_THEN_RUN,
        standin,
        *argv,
    ]


def upload(
    standin: Path, put: Callable[[str, str, Path], None], fetched: Mapping[str, Unchanged] | None = None
) -> int:
    """Every file of the stand-in tree to its object, `put(bucket, object, file)`, except the
    objects fetched before the run (local/gcsfill.py) that the run left as they were.

    Args:
        standin: the tree bind-mounted at /gcs (BUCKET/NAME under it).
        put: uploads one file.
        fetched: BUCKET/NAME -> what was fetched there (`same_file(path)`: still unchanged).
    Returns:
        The number of files uploaded.
    """
    fetched = fetched or {}
    count = 0
    for path in sorted(p for p in standin.rglob("*") if p.is_file() and not p.is_symlink()):
        key = path.relative_to(standin).as_posix()
        bucket, _, obj = key.partition("/")
        known = fetched.get(key)
        if bucket and obj and not (known is not None and known.same_file(path)):
            put(bucket, obj.removesuffix(CONFLICT_SUFFIX), path)
            count += 1
    return count


def deleted(standin: Path, fetched: Mapping[str, Unchanged]) -> list[tuple[str, str, str]]:
    """(bucket, object, generation fetched) of every object fetched into the stand-in whose file
    the run deleted (nothing is left at its path), in the order of their keys."""
    gone = []
    for key in sorted(fetched):
        bucket, _, obj = key.partition("/")
        path = standin / key
        if bucket and obj and not path.exists() and not path.is_symlink():
            gone.append((bucket, obj.removesuffix(CONFLICT_SUFFIX), fetched[key].generation))
    return gone
