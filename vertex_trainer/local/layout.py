"""Where a local run keeps what it made, and how a run is found again (docs/contract.md section 15).

    <output_dir>/                              the base: every run of the spec, side by side
      <name>-<key>/                            one submission's folder (the CustomJob's
                                               baseOutputDirectory): model/, checkpoints/, logs/,
                                               metrics.json; the user's code owns it
      latest -> <name>-<key>                   the newest run started here
      .vertex-trainer/<name>-<key>/            the tool's records of that run, never inside it:
                                               run.json, custom_job.json, spec.yaml, logs/,
                                               result.json
      .vertex-trainer/gcs/                     the /gcs stand-in the base's runs share (a
                                               bucket outlives a run), and what it fetched

`records_of(run_dir)` (contract.py) is the one rule: a run folder's records are beside it, so a
script that empties or replaces its output folder takes none of them. With fixed_output_dir the
run folder is output_dir itself, and its records are beside it too. Runs made before the folders
were per run kept a `vertex-trainer/` record inside their output directory: still read.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from vertex_trainer.contract import (
    LATEST_LINK,
    RECORD_DIR,
    RECORDS_DIR,
    folder_digest,
    records_of,
    run_folder,
)
from vertex_trainer.errors import UserError

RUN_FILE = "run.json"  # in a run's records: its name, job id, folder and start time
STANDIN_DIR = "gcs"  # <base>/.vertex-trainer/gcs: the /gcs stand-in of the base's runs
_KEPT = (RUN_FILE, "custom_job.json", "hyperparameter_tuning_job.json")  # what makes records a run's
_RUN_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,200}")

__all__ = [
    "RUN_FILE",
    "STANDIN_DIR",
    "Found",
    "default_run_dir",
    "find_run",
    "gs_run_held",
    "gs_run_lock",
    "link_latest",
    "record_dir",
    "resumed_run",
    "runs_in",
    "write_run_file",
]


def record_dir(run_dir: str) -> str | None:
    """The records of the run in the local folder `run_dir` (None for gs://: Vertex AI keeps a
    cloud job's CustomJob and Cloud Logging its log)."""
    return None if run_dir.startswith("gs://") else records_of(run_dir)


def default_run_dir(name: str, run: str, tmp: str | None = None) -> str:
    """A local run's folder when the spec names no output_dir: <tmp>/vertex-trainer/<name>/<run>,
    below the root `private_root` makes (or checks) this user's alone."""
    return os.path.join(private_root(tmp), name, run)


def private_root(tmp: str | None = None) -> str:
    """<tmp>/vertex-trainer, created 0700, or kept when it is this user's own folder (its group
    and others' access taken away). /tmp is shared: a root another user made (or a link there)
    would give them the runs' models, checkpoints and the bucket data fetched into the /gcs
    stand-in, to read or replace; exit 2 naming it."""
    root = os.path.join(tmp or tempfile.gettempdir(), "vertex-trainer")
    try:
        os.mkdir(root, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(root)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise UserError(
            f"output_dir (unset): the default folder {root} is "
            + ("not a folder" if not stat.S_ISDIR(st.st_mode) else f"owned by another user (uid {st.st_uid})")
            + ", so another user could read or replace your runs",
            hint=f"set output_dir in the spec, or remove {root} (it is not yours)",
        )
    if st.st_mode & 0o077:
        os.chmod(root, 0o700)
    return root


def gs_run_lock(folder: str, tmp: str | None = None) -> str | None:
    """The records a local run of the gs:// `folder` holds its lock in on this machine (a bucket
    has no flock): <tmp>/vertex-trainer/.gs-locks/<sha256 of the folder>, below this user's private
    root; None when that root is not usable (another user's: then no lock, as without flock)."""
    try:
        root = private_root(tmp)
    except UserError:
        return None
    return os.path.join(root, ".gs-locks", folder_digest(folder))


LOCK_FILE = "runner.lock"  # in a run's records: held (flock) by the runner while the run runs


def gs_run_held(folder: str, tmp: str | None = None) -> bool:
    """Whether a local run on this machine writes the gs:// `folder` now: its runner holds the
    flock of `gs_run_lock` (no lock file, or no flock here: False)."""
    lock = gs_run_lock(folder, tmp)
    if lock is None:
        return False
    try:
        fd = os.open(os.path.join(lock, LOCK_FILE), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _trusted_root(root: Path) -> bool:
    """Whether runs found by name below `root` are this user's: a folder of theirs (not a link)
    that no one else can write to."""
    try:
        st = os.lstat(root)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def write_run_file(
    record: str,
    *,
    run: str,
    run_dir: str,
    job_id: str,
    region: str | None = None,
    max_cost: float | None = None,
) -> None:
    """run.json: what finds the run again (its name, job id, folder, start time), and what its
    report prices it by (the spec's region and scheduling.max_cost: the report reads no YAML)."""
    os.makedirs(record, exist_ok=True)
    data = {"run": run, "job_id": job_id, "output_dir": run_dir, "started": time.time()}
    data.update(region=region, max_cost=max_cost)
    with open(os.path.join(record, RUN_FILE), "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.write("\n")


def link_latest(run_dir: str) -> None:
    """<base>/latest -> the run's folder (relative, replaced atomically); nothing where the file
    system has no symbolic links, or where `latest` is something of the user's."""
    base, run = os.path.split(run_dir.rstrip("/"))
    link = os.path.join(base, LATEST_LINK)
    if os.path.exists(link) and not os.path.islink(link):
        return  # a folder or file the user named latest: never replaced
    tmp = f"{link}.{os.getpid()}.tmp"
    try:
        os.symlink(run, tmp)
        os.replace(tmp, link)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


@dataclass(frozen=True)
class Found:
    """A local run found again: its folder (what the user's code wrote) and its records."""

    run_dir: Path
    record: Path


def _started(record: Path) -> float:
    try:
        value = json.loads((record / RUN_FILE).read_text(encoding="utf-8")).get("started")
        return float(value)
    except (OSError, ValueError, TypeError, AttributeError):
        try:
            return record.stat().st_mtime
        except OSError:
            return 0.0


def runs_in(base: Path) -> list[Found]:
    """The runs below the base folder `base` (its `.vertex-trainer/` records), oldest first."""
    records = base / RECORDS_DIR
    found = []
    if records.is_dir():
        for record in records.iterdir():
            kept = any((record / name).is_file() for name in _KEPT)
            if record.is_dir() and _RUN_NAME.fullmatch(record.name) and kept:
                found.append((_started(record), Found(base / record.name, record)))
    return [f for _, f in sorted(found, key=lambda t: t[0])]


def _as_run(path: Path) -> Found | None:
    """`path` as a run's folder, its records or (the older layout) its vertex-trainer/ record."""
    own = Path(records_of(str(path)))
    if own.is_dir():
        return Found(path, own)
    if path.parent.name == RECORDS_DIR and path.is_dir():  # the records themselves
        return Found(path.parent.parent / path.name, path)
    for run_dir, record in ((path, path / RECORD_DIR), (path.parent, path)):  # before section 15
        if record.name == RECORD_DIR and (
            (record / "logs").is_dir() or (record / "custom_job.json").is_file()
        ):
            return Found(run_dir, record)
    return None


def find_run(ref: str, *, tmp: str | None = None) -> Found | None:
    """A local run from what a person types: its folder, its records, the base folder of a spec's
    runs (the newest run in it), or a spec's name whose runs went to the default place
    (<tmp>/vertex-trainer/<name>/: the newest). None when nothing matches."""
    path = Path(ref).expanduser()
    if path.exists():
        path = path.resolve()  # <base>/latest: the run it points to
        if path.name == "logs" and path.parent.parent.name == RECORDS_DIR:
            path = path.parent  # a run's records/logs
        found = _as_run(path)
        if found is not None:
            return found
        runs = runs_in(path)
        return runs[-1] if runs else None
    if not _RUN_NAME.fullmatch(ref):
        return None
    root = Path(tmp or tempfile.gettempdir()) / "vertex-trainer"
    if not _trusted_root(root):
        return None  # another user's (or a shared) folder: what it holds is not your runs
    runs = runs_in(root / ref)
    if runs:
        return runs[-1]
    legacy = sorted(  # <tmp>/vertex-trainer/<name>-<time>/vertex-trainer/ (before section 15)
        p
        for p in root.glob(f"{ref}-*")
        if re.fullmatch(re.escape(ref) + r"-\d{8}-\d{6}", p.name) and (p / RECORD_DIR / "logs").is_dir()
    )
    return Found(legacy[-1], legacy[-1] / RECORD_DIR) if legacy else None


def resumed_run(output_dir: str | None, resume: str, *, fixed: bool, local: bool) -> tuple[str, str]:
    """(name, folder) of the run `resume` names, to continue it (`submit --resume RUN`): a run's
    name below output_dir, or its folder (a path, or gs://). A local folder must hold a run
    (exit 2 otherwise, naming the runs there); a gs:// one is checked before the job is created."""
    if fixed:
        raise UserError(
            "--resume: fixed_output_dir: true already makes every submission continue in output_dir",
            hint="drop --resume (or fixed_output_dir)",
        )
    text = resume.strip().rstrip("/")
    if not text:
        raise UserError("--resume needs a run: its name below output_dir, or its folder")
    if "/" not in text:
        if not _RUN_NAME.fullmatch(text):
            raise UserError(f"--resume {resume!r}: not a run's name (lowercase letters, digits, '-', '_')")
        if not output_dir:
            raise UserError(
                f"--resume {resume!r}: the spec has no output_dir to find the run in",
                hint="set output_dir, or give the run's folder",
            )
        folder = run_folder(output_dir, text)
    else:
        folder = text
    if folder.startswith("gs://"):  # its objects are looked for before the job is created
        return folder.rsplit("/", 1)[-1], folder
    if not local:
        raise UserError(
            f"--resume {resume!r}: a Vertex AI job continues a run in Cloud Storage (gs://...)",
            hint="give the run's name below output_dir (gs://), or run with --local",
        )
    path = Path(folder.removeprefix("file://")).expanduser().resolve()
    found = _as_run(path) if path.is_dir() else None
    if found is None:
        known = [f.run_dir.name for f in runs_in(path.parent)] if path.parent.is_dir() else []
        raise UserError(
            f"--resume {resume!r}: no run in {path}",
            hint=("runs there: " + ", ".join(known[-5:])) if known else "submit without --resume first",
        )
    return found.run_dir.name, str(found.run_dir)
