"""A gs:// run folder's records: its result.json beside the folder in the bucket.

A local folder's records are files beside it (local/layout.py); a run whose output_dir is in Cloud
Storage keeps only how it ended, as `<output_dir>/.vertex-trainer/<run>/result.json` (records_of),
and only a submission's run does (new or `--resume`d; not a sandbox job's nor a trial's). A retry
with the same idempotency key reads it to adopt a run that SUCCEEDED (local/run.py `_adopted`).

While the run runs, the record says so (`mark_running`, JOB_STATE_RUNNING, written before any
replica starts): a run that ends without writing its own end (the runner killed, the write
refused) never leaves the record of the run before it (a SUCCEEDED one that `--resume` went on
training, or one whose folder was emptied) for a retry to adopt as its own.

A Vertex AI job that continues the folder (a cloud `submit --resume`) writes no record of its own:
before it is created, the record a local run left there is replaced by one naming the job's key
(`hand_over`), and a retry of that local run's key is then refused rather than adopt what the job
left as its own result or train over it (local/run.py `_adopted`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from vertex_trainer.contract import records_of
from vertex_trainer.errors import ServiceError, UserError
from vertex_trainer.gcp import storage
from vertex_trainer.local.runlog import RESULT_FIELDS, RESULT_FILE, RUNNING
from vertex_trainer.settings import Settings

# result.json of a gs:// run: RunLog.close's fields, less the log's tail, plus the run's name
FIELDS = (*(k for k in RESULT_FIELDS if k != "log_tail"), "run")

CONTINUED_BY = "continued_by_key"  # a record's: the key of the Vertex AI job that continues its folder

__all__ = ["CONTINUED_BY", "FIELDS", "hand_over", "keep", "mark_running", "read", "refuse_foreign", "uri_of"]


def uri_of(folder: str) -> str:
    """gs://.../.vertex-trainer/<run>/result.json: the record of the run in the gs:// `folder`."""
    return f"{records_of(folder.rstrip('/'))}/{RESULT_FILE}"


def _put(settings: Settings, uri: str, value: dict[str, Any]) -> None:
    from google.cloud.storage.retry import DEFAULT_RETRY

    bucket, name = storage.split_uri(uri)
    # (the same bytes again: a retried upload is idempotent, so transient errors are retried)
    storage.client(settings).bucket(bucket).blob(name).upload_from_string(
        json.dumps(value, indent=2).encode(), content_type="application/json", retry=DEFAULT_RETRY
    )


def read(settings: Settings, folder: str) -> dict[str, Any] | None:
    """The record of the run in `folder`, or None (none, not JSON). Cloud Storage's errors raise."""
    return storage.read_json(settings, uri_of(folder))


def mark_running(
    settings: Settings, folder: str, *, run: str, name: str, job_id: str, replicas: list[str]
) -> None:
    """Before the run in the gs:// `folder` starts: its record says it runs (JOB_STATE_RUNNING),
    in place of whatever an earlier run of the folder left. When that cannot be written, nothing
    runs: UserError (exit 2) for a bucket that does not exist, ServiceError (exit 3) otherwise."""
    from google.api_core import exceptions as gexc

    uri = uri_of(folder)
    value = {"name": name, "state": RUNNING, "job_id": job_id, "replicas": replicas, "run": run}
    try:
        _put(settings, uri, value)
    except gexc.NotFound:
        raise UserError(
            f"output_dir: the bucket gs://{storage.split_uri(uri)[0]} does not exist; nothing ran",
            hint="create it (gcloud storage buckets create), or set output_dir to a bucket of yours",
        ) from None
    except Exception as exc:  # (any: auth, network, permissions) the run would leave a stale record
        raise ServiceError(
            f"could not record that run {run} is running in {uri} ({type(exc).__name__}: {exc}); "
            "nothing ran: the record an earlier run left there would be taken for this run's",
            hint="the account needs to write and replace objects there (roles/storage.objectUser); "
            "then submit again",
        ) from None


def hand_over(settings: Settings, folder: str, *, run: str, name: str, key: str) -> bool:
    """Before a Vertex AI job (idempotency key `key`) is created to continue the gs:// `folder`:
    a record a local run left there says how that run ended, no longer how the folder's run does,
    so it is replaced by one that says a job with `key` runs there (JOB_STATE_RUNNING,
    CONTINUED_BY). No record there, or none this account may read (then no local run of its
    left one): nothing is written (False). When one cannot be replaced, nothing is sent:
    ServiceError (exit 3)."""
    uri = uri_of(folder)
    value = {"name": name, "state": RUNNING, "job_id": "", "replicas": [], "run": run, CONTINUED_BY: key}
    try:
        if read(settings, folder) is None:
            return False
    except Exception:  # (any: no read access, a network error) nothing known to replace
        return False
    try:
        _put(settings, uri, value)
    except Exception as exc:  # (any: auth, network, permissions) the local run's record would stay
        raise ServiceError(
            f"could not record in {uri} that a Vertex AI job continues {folder} "
            f"({type(exc).__name__}: {exc}); nothing was sent: the record a local run left there "
            "would be taken for the folder's result",
            hint="the account needs to write and replace objects there (roles/storage.objectUser); "
            "then submit again",
        ) from None
    return True


def keep(result: Any, settings: Settings, note: Callable[..., None], *, spec: str | None = None) -> None:
    """How the run ended (`result`, a LocalResult: its FIELDS; `spec`, the hash of the spec it ran,
    its CustomJob's vertex-trainer-spec label), as its record. A failure to write it is one
    warning line (`note`): the record still says the run runs, so the same key runs it again
    rather than adopt it."""
    uri = uri_of(result.output_dir)
    try:
        _put(settings, uri, {**{k: getattr(result, k) for k in FIELDS}, "spec": spec})
    except Exception as exc:  # (any: auth, network, permissions) never a failed run
        why = f"{type(exc).__name__}: {exc}"
        note(
            f"could not keep the run's result in {uri} ({why}): the same key runs it again",
            style="bold yellow",
        )


def refuse_foreign(settings: Settings, folder: str, run: str, record: dict[str, Any] | None) -> None:
    """Before a new local submission runs in the gs:// `folder` (its key's, `run`): exit 2 when a
    Vertex AI job wrote what the folder holds, which is neither this run's result to adopt nor a
    folder to train over: its `record` names the run and the job that continued it (`hand_over`),
    or there is no record and yet the folder holds objects (a cloud submit with the same key: a
    local submission's run always leaves a record). Only the key's own folder (named `run`): the
    one folder of fixed_output_dir is every submission's by choice, and what it holds is trained
    over, as a cloud job there does (whatever its key). Cloud Storage's errors raise."""
    if folder.rstrip("/").rsplit("/", 1)[-1] != run:  # (fixed_output_dir: output_dir itself)
        return
    key = (record or {}).get(CONTINUED_BY) if (record or {}).get("run") == run else None
    if key:
        what = f"was continued on Vertex AI by the job with idempotency key {key} (submit --resume)"
        what += " after this submission's run here"
        that = f"that job: vertex-trainer list --label vertex-trainer-key={key}; "
    elif record is None and storage.holds_objects(settings, folder):
        what = "holds what no run here made (a Vertex AI job with the same idempotency key writes there)"
        that = ""
    else:
        return
    raise UserError(
        f"{run}: {folder} {what}: what it holds is that job's, so it is neither adopted as this "
        "run's result nor trained over; nothing ran",
        hint=f"{that}to train on in its folder here: --resume {run}; a new run: another --idempotency-key",
    )
