"""/gcs/BUCKET/ for local replicas, as Cloud Storage FUSE gives it on Vertex AI (issue 32 item 4).

On Vertex AI every bucket is mounted at /gcs/BUCKET/, and Google's samples write there (they turn
AIP_MODEL_DIR's gs:// into /gcs/). Here, each replica of a script job runs in a mount namespace of its own
(`unshare --mount`) in which a stand-in directory is bind-mounted at /gcs: the replicas of one
run share it, and no other process on the machine sees it. The stand-in is a bucket kept as a
directory tree, `<stand-in>/BUCKET/path`: for a run whose output directory is local it is
`<output>/vertex-trainer/gcs/` and stays there; for a run that writes to Cloud Storage (gs://
output_dir, e.g. in `dev sandbox`) it is a scratch directory whose files are uploaded to
gs://BUCKET/path when the run ends (`upload`), so the objects are where Vertex AI would have put
them. Reads see what the run itself wrote, not the bucket's older objects.

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
from collections.abc import Callable
from pathlib import Path

MOUNT_POINT = "/gcs"
# $0 is the stand-in, "$@" the replica's argv: the shell only mounts, then becomes the replica.
_MOUNT_THEN_RUN = f'mount --bind "$0" {MOUNT_POINT} && exec "$@"'


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


def upload(standin: Path, put: Callable[[str, str, Path], None]) -> int:
    """Every file of the stand-in tree to its object: `put(bucket, object, file)`.

    Returns:
        The number of files uploaded.
    """
    count = 0
    for path in sorted(p for p in standin.rglob("*") if p.is_file() and not p.is_symlink()):
        bucket, _, obj = path.relative_to(standin).as_posix().partition("/")
        if bucket and obj:
            put(bucket, obj, path)
            count += 1
    return count
