"""The /gcs stand-in filled before the replicas start, so that reads see the bucket's objects.

On Vertex AI, Cloud Storage FUSE shows every object of gs://BUCKET at /gcs/BUCKET/; Google's
samples read their data that way. A local run's stand-in (local/gcsfuse.py) starts with what
earlier runs into the same output directory wrote, so before the replicas start, every
/gcs/BUCKET/PATH the replicas are given (spec args and env, cluster.fuse_refs) is fetched from the
bucket in use (the Cloud Storage emulator when one is set, else Cloud Storage with Application
Default Credentials) into the stand-in:

* PATH naming one object fetches that object; PATH naming a "folder" fetches every object under
  PATH/; a glob (`train-*`) fetches the objects it matches. A path that names nothing (an output
  the script will write) fetches nothing.
* The bound: at most MAX_OBJECTS objects and MAX_BYTES bytes per run, counted from the listing
  before anything is downloaded. Above either the run is refused (exit 2) naming the field and
  value: a partial copy would make reads silently wrong, and `/gcs/BUCKET/` must not copy a bucket.
* The paths under the job's own AIP_* directories are not fetched: the run writes them.
* An object whose name is also a folder of others (gs://B/data/sub and gs://B/data/sub/c.txt),
  or a folder in the stand-in already: as Cloud Storage FUSE shows it (its semantics page,
  "Name conflicts"), the folder has the name and the object is the file `sub\n` beside it (a line
  feed, which no object name can hold, ends its name); the run's log says so in one line, and
  gcsfuse.upload maps the file back to its object.
* A file the stand-in already has is kept when an earlier run wrote or changed it (it is newer
  than anything fetched); a file fetched earlier and unchanged since is fetched again only when
  the object's generation changed. The record (`Fetched`, per file: generation, size, mtime) is
  kept beside a local run's stand-in (`<output_dir>/.vertex-trainer/gcs-fetched.json`).
* Without an emulator or credentials, each path must already be in the stand-in (an earlier
  run wrote it, or you put it there); otherwise exit 2 before the run, naming the field and value.

When a run that writes to Cloud Storage ends, gcsfuse.upload skips every fetched file whose size
and mtime are what they were when it was fetched: only what the run wrote or changed goes back;
and a fetched file the run deleted is deleted from the bucket if the object is still at the
generation fetched (gcsfuse.deleted).
"""

from __future__ import annotations

import fnmatch
import glob
import json
import os
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertex_trainer.contract import AIP_DIRS
from vertex_trainer.errors import ServiceError, UserError
from vertex_trainer.gcp import storage
from vertex_trainer.local import cluster, gcsfuse
from vertex_trainer.local.cluster import FUSE_ROOT, FuseRef
from vertex_trainer.local.gcsfuse import CONFLICT_SUFFIX
from vertex_trainer.settings import Settings
from vertex_trainer.sizes import human_size

if TYPE_CHECKING:  # the spec's models are named for the type checker: the runner is given one
    from vertex_trainer.spec import JobSpec

MAX_OBJECTS = 10_000
MAX_BYTES = 1 << 30  # 1 GiB
RECORD_NAME = "gcs-fetched.json"  # beside the stand-in, not in it (never uploaded, not under /gcs)
_GLOB = "*?["
_THREADS = 8


@dataclass(frozen=True)
class Fetched:
    """A stand-in file as it was fetched: the object's generation, the file's size and mtime."""

    generation: str
    size: int
    mtime_ns: int

    def same_file(self, path: Path) -> bool:
        """Is the file at `path` still as it was fetched (size and mtime)?"""
        try:
            st = path.stat()
        except OSError:
            return False
        return st.st_size == self.size and st.st_mtime_ns == self.mtime_ns


@dataclass
class Fill:
    """What `prefill` did. `fetched`: every stand-in file (BUCKET/NAME) that holds an object as
    fetched (now or by an earlier run, unchanged since), for gcsfuse.upload to skip."""

    fetched: dict[str, Fetched] = field(default_factory=dict)
    downloaded: int = 0
    downloaded_bytes: int = 0
    kept: int = 0  # files an earlier run wrote or changed, kept over the bucket's objects
    conflicts: list[str] = field(default_factory=list)  # BUCKET/NAME: an object and a folder

    def line(self) -> str | None:
        """One line for the run's log; None when nothing was fetched or kept."""
        if not self.downloaded and not self.kept:
            return None
        size = human_size(self.downloaded_bytes)
        text = f"/gcs: {self.downloaded} object(s) ({size}) fetched into the stand-in"
        if self.kept:
            text += f"; {self.kept} file(s) earlier runs wrote kept over the bucket's objects"
        if self.conflicts:
            first = self.conflicts[0]
            more = f" (and {len(self.conflicts) - 1} more)" if len(self.conflicts) > 1 else ""
            text += (
                f"; gs://{first} is an object and a folder{more}: as Cloud Storage FUSE shows them, "
                f"/gcs/{first} is the folder and the object is the file /gcs/{first}\\n (its name "
                "ends with a line feed)"
            )
        return text


def wanted(refs: list[FuseRef], base_output: str) -> list[FuseRef]:
    """The refs whose objects are read: not those under the job's AIP_* directories (written)."""
    if not base_output.startswith("gs://"):
        return refs
    base = FUSE_ROOT + base_output[len("gs://") :].rstrip("/")
    written = tuple(f"{base}/{sub}" for sub in AIP_DIRS.values())
    return [
        r for r in refs if not any(r.path.rstrip("/") == w or r.path.startswith(w + "/") for w in written)
    ]


def matches(name: str, rest: str) -> bool:
    """Does object `name` belong to the path BUCKET/`rest`: the object itself, one under the
    folder `rest/`, or (a glob) one it matches or one under a folder it matches?"""
    if not rest:
        return True
    if any(c in rest for c in _GLOB):
        return fnmatch.fnmatchcase(name, rest) or fnmatch.fnmatchcase(name, rest + "/*")
    return name == rest or name.startswith(rest + "/")


def in_standin(standin: Path, ref: FuseRef) -> bool:
    """Does the stand-in hold something at the ref's path (a file, a folder, a glob's match)?"""
    path = standin / ref.bucket / ref.name
    if any(c in ref.name for c in _GLOB):
        return bool(glob.glob(glob.escape(str(standin / ref.bucket)) + "/" + ref.name))
    return path.exists()


def load_record(path: Path) -> dict[str, Fetched]:
    """The record of an earlier run's fetches ({} when absent or unreadable)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return {str(k): Fetched(**v) for k, v in raw.items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def save_record(path: Path, fetched: dict[str, Fetched]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({k: asdict(v) for k, v in sorted(fetched.items())}, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def prefill(
    refs: list[FuseRef],
    standin: Path,
    settings: Settings,
    *,
    route: str | None,
    record: dict[str, Fetched] | None = None,
    max_objects: int = MAX_OBJECTS,
    max_bytes: int = MAX_BYTES,
) -> Fill:
    """Fetch the objects `refs` name into `standin` (the module docstring says which).

    Args:
        refs: the /gcs/ paths the replicas are given (cluster.fuse_refs, then `wanted`).
        standin: the directory bind-mounted at /gcs (BUCKET/NAME under it).
        settings: the Cloud Storage route (storage_emulator) and retry policy.
        route: cluster.fetch_route ('emulator', 'credentials', None: no way to read buckets).
        record: what earlier runs fetched into this stand-in (load_record).
        max_objects, max_bytes: the bound on one run's fetch.
    Returns:
        The Fill (what is now fetched, for the upload at the end).
    Raises:
        UserError: exit 2 before the run: no route and a path the stand-in lacks; a bucket that
            does not exist; more than the bound. ServiceError: Cloud Storage failed (exit 3).
    """
    fill = Fill()
    if not refs:
        return fill
    if route is None:
        _refuse_without_route([r for r in refs if not in_standin(standin, r)], standin)
        return fill
    listed = _list(refs, settings, max_objects + 1)
    objects: dict[str, dict[str, Any]] = {}
    for ref, items, _ in listed:
        for item in items:
            objects.setdefault(f"{ref.bucket}/{item['name']}", item)
    total = sum(int(item.get("size") or 0) for item in objects.values())
    if len(objects) > max_objects or total > max_bytes or any(cut for *_, cut in listed):
        _refuse_too_much(listed, max_objects, max_bytes)
    earlier = record or {}
    folders = {key.rsplit("/", n)[0] for key in objects for n in range(1, key.count("/"))}
    todo: list[tuple[str, str, dict[str, Any]]] = []
    for key, item in sorted(objects.items()):
        if key.endswith("/"):  # a folder placeholder
            if (path := _file_of(standin, key)) is not None:
                path.mkdir(parents=True, exist_ok=True)
            continue
        conflict = key in folders or (standin / key).is_dir()  # the folder has the name (gcsfuse's rule)
        name = key + CONFLICT_SUFFIX if conflict else key
        path = _file_of(standin, name)
        if path is None:  # a name no file can have here
            continue
        if conflict:
            fill.conflicts.append(key)
        known = earlier.get(name)
        generation = str(item.get("generation") or "")
        if path.exists() or path.is_symlink():
            if known is None or not known.same_file(path):
                fill.kept += 1  # an earlier run wrote or changed it
                continue
            if known.generation == generation:
                fill.fetched[name] = known
                continue
        todo.append((key, name, item))
    with ThreadPoolExecutor(_THREADS) as pool:
        for name, done in pool.map(lambda t: (t[1], _download(settings, standin, *t)), todo):
            if done is not None:
                fill.fetched[name] = done
                fill.downloaded += 1
                fill.downloaded_bytes += done.size
    return fill


def _list(
    refs: list[FuseRef], settings: Settings, limit: int
) -> list[tuple[FuseRef, list[dict[str, Any]], bool]]:
    """Each ref with the objects it names (name, size, generation), through the one pager, and
    whether the listing was cut at `limit` objects (there are more)."""
    api = storage.storage_api(settings)
    api.user_error = lambda _op, err: err.code == 404  # a bucket that does not exist: the spec's
    listed: dict[str, tuple[list[dict[str, Any]], bool]] = {}
    for ref in refs:
        key = f"{ref.bucket}/{ref.name}"
        if key in listed:
            continue
        prefix = ref.name
        for c in _GLOB:
            prefix = prefix.split(c)[0]
        try:
            raw = [
                item
                for page in api.pages(
                    "list objects",
                    "GET",
                    f"storage/v1/b/{ref.bucket}/o",
                    items="items",
                    params={"prefix": prefix, "fields": "items(name,size,generation),nextPageToken"},
                    page_size=1000,
                    max_pages=None,
                    limit=limit,  # past the bound: enough to refuse, never a whole bucket
                )
                for item in page
            ]
        except UserError as exc:
            raise UserError(
                f"{ref.field} {ref.value!r}: {ref.path} is gs://{key} on Vertex AI, and that "
                f"bucket cannot be listed here ({exc.message})",
                hint="create the bucket (in the emulator of `vertex-trainer dev gcs-emulator`, or "
                "the sandbox's), or correct the path",
            ) from None
        items = [item for item in raw if matches(str(item.get("name", "")), ref.name)]
        listed[key] = (items, len(raw) >= limit)
    return [(ref, *listed[f"{ref.bucket}/{ref.name}"]) for ref in refs]


def _file_of(standin: Path, key: str) -> Path | None:
    """The stand-in file (or folder, for a name ending in /) of object BUCKET/NAME; None for a
    name no path here can have: '.', '..' or empty segments, a name under a file an earlier run
    left where the bucket has a folder."""
    parts = key.rstrip("/").split("/")
    if any(p in ("", ".", "..") for p in parts):
        return None
    path = standin.joinpath(*parts)
    if any(p.is_file() for p in path.parents[: len(parts) - 1]):
        return None
    if path.is_dir() and not key.endswith("/"):
        return None
    return path


def _download(settings: Settings, standin: Path, key: str, name: str, item: dict[str, Any]) -> Fetched | None:
    """Object BUCKET/`key` to the stand-in file BUCKET/`name`; its Fetched (None: it was deleted
    since the listing)."""
    from google.api_core import exceptions as gexc

    path = standin / name
    try:
        data = storage.read_bytes(settings, f"gs://{key}")
    except gexc.GoogleAPIError as exc:
        raise ServiceError(f"reading gs://{key} for /gcs/{key} failed: {exc}") from None
    if data is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.vertex-trainer-fetch")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    st = path.stat()
    return Fetched(str(item.get("generation") or ""), st.st_size, st.st_mtime_ns)


def _refuse_without_route(missing: list[FuseRef], standin: Path) -> None:
    if not missing:
        return
    where = "; ".join(f"{r.field} {r.value!r}" for r in missing)
    first = missing[0]
    raise UserError(
        f"{where}: {first.path} is gs://{first.bucket}/{first.name} on Vertex AI; this run can read "
        "no bucket (there is neither a Cloud Storage emulator nor Application Default Credentials), "
        f"and its /gcs stand-in ({standin}) does not have that path",
        hint="`vertex-trainer dev gcs-emulator` and export what it prints, or `gcloud auth "
        "application-default login`; or, for a path the script only writes (or to run with files "
        f"of your own), create it in the stand-in: mkdir -p {standin / first.bucket / first.name}",
    )


def _refuse_too_much(
    listed: list[tuple[FuseRef, list[dict[str, Any]], bool]], max_objects: int, max_bytes: int
) -> None:
    parts = []
    for ref, items, cut in listed:
        size = sum(int(i.get("size") or 0) for i in items)
        count = f"more than {max_objects:,}" if cut else f"{len(items):,}"
        parts.append(f"{ref.field} {ref.value!r}: {count} object(s), {human_size(size)}")
    raise UserError(
        "; ".join(parts) + ": more than a local run copies into its /gcs stand-in before the "
        f"replicas start (at most {max_objects:,} objects and {human_size(max_bytes)} in all)",
        hint="name a narrower path (a folder or one object, e.g. /gcs/BUCKET/data/train.csv), "
        "or run on Vertex AI, where Cloud Storage FUSE reads objects as they are needed",
    )


def fill_standin(
    job: dict[str, Any], spec: JobSpec | None, base_output: str, standin: Path, settings: Settings
) -> Fill:
    """Before the replicas of `job` start: fetch what its /gcs/ paths name into `standin`.

    Args:
        job: the rendered CustomJob (its args and env name the paths, cluster.fuse_refs).
        spec: its JobSpec (names the fields in messages), or None.
        base_output: the run's output directory (gs://: `standin` is scratch, removed on failure;
            local: the record of fetches is kept beside `standin`).
        standin: the directory bind-mounted at /gcs.
        settings: the Cloud Storage route; `environ` finds credentials.
    Returns:
        The Fill, for the upload when the run ends.
    Raises:
        UserError, ServiceError: as `prefill`, before anything has run.
    """
    refs = wanted(cluster.fuse_refs(job, spec), base_output)
    if not refs:
        return Fill()
    scratch = base_output.startswith("gs://")
    path = None if scratch else standin.parent / RECORD_NAME
    record = load_record(path) if path is not None else {}
    route = cluster.fetch_route(settings.storage_emulator, settings.environ)
    try:
        fill = prefill(refs, standin, settings, route=route, record=record)
    except BaseException:
        if scratch:
            shutil.rmtree(standin, ignore_errors=True)
        raise
    if path is not None and fill.fetched:
        save_record(path, {**record, **fill.fetched})
    return fill


def upload_standin(standin: Path, settings: Settings, note: Callable[[str], None], fill: Fill) -> None:
    """What the replicas wrote or changed under /gcs/BUCKET/ (not what was fetched and left as it
    was), to gs://BUCKET/ (as Cloud Storage FUSE would have written it), and the fetched objects
    whose files they deleted, deleted; then the scratch directory removed."""
    client = storage.client(settings)

    def put(bucket: str, obj: str, path: Path) -> None:
        client.bucket(bucket).blob(obj).upload_from_filename(str(path))

    try:
        count = gcsfuse.upload(standin, put, fill.fetched)
        gone = gcsfuse.deleted(standin, fill.fetched)
    finally:
        shutil.rmtree(standin, ignore_errors=True)
    if count:
        note(f"/gcs: {count} file(s) the replicas wrote uploaded to their buckets")
    if gone:
        removed, kept = _delete_fetched(client, gone)
        note(
            f"/gcs: {removed} object(s) the replicas deleted deleted from their buckets"
            + (f"; {kept} kept: changed in the bucket since they were fetched" if kept else "")
        )


def _delete_fetched(client: Any, gone: list[tuple[str, str, str]]) -> tuple[int, int]:
    """Delete each (bucket, object) still at the generation that was fetched; (deleted, kept).

    An object another writer replaced since (another generation) is kept: the run deleted what it
    had read, not the newer object. The delete carries the generation as a precondition, so
    Cloud Storage refuses it if the object changes between the check and the delete."""
    from google.api_core.exceptions import NotFound, PreconditionFailed

    removed = kept = 0
    for bucket, obj, generation in gone:
        blob = client.bucket(bucket).get_blob(obj)
        if blob is None:  # already gone
            continue
        if str(blob.generation) != generation:
            kept += 1
            continue
        try:
            blob.delete(if_generation_match=blob.generation)
        except PreconditionFailed:
            kept += 1
            continue
        except NotFound:
            continue
        removed += 1
    return removed, kept
