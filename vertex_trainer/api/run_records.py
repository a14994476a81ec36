"""A cloud submission meets the record of a run made here (`submit --local` into the same gs://
folder: its result.json, local/gsresult.py). `check_local_run` refuses a new job into such a
folder; `hand_over` replaces the record when a job continues the folder on purpose (`--resume`, or
the one folder of fixed_output_dir). Both read through the JSON API's client (`local_record`), so
a plain cloud submit never loads google-cloud-storage for the look."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vertex_trainer import preflight
from vertex_trainer.errors import ServiceError, UserError
from vertex_trainer.gcp import storage
from vertex_trainer.gcp.http import ApiError, Denied, Refused
from vertex_trainer.local import gsresult
from vertex_trainer.settings import Settings

if TYPE_CHECKING:
    from vertex_trainer.api.plan import SubmitPlan

__all__ = ["check_local_run", "hand_over", "local_record"]


def check_local_run(plan: SubmitPlan, settings: Settings) -> None:
    """A new cloud submission whose gs:// folder holds the record of a run made here (`submit
    --local` with the same key and output_dir: its result.json, local/gsresult.py): exit 2 before
    anything is built or created. A job there would write over that run's model and checkpoints,
    and the local key again would adopt the job's work as that run's result."""
    folder = plan.output
    if plan.resumed is not None or plan.spec.fixed_output_dir or not (folder or "").startswith("gs://"):
        return
    if settings.offline and not settings.storage_emulator:  # (no bucket to read, as _check_resumed)
        return
    record = local_record(str(folder), settings)
    if record is None:
        return
    state = str(record.get("state") or "").removeprefix("JOB_STATE_") or "no state"
    made = f"made with submit --local ({state})"
    if record.get("name") and record["name"] != plan.spec.name:  # (another spec's name and key met here)
        made = f"of the job {record['name']!r} {made}"
    elif record.get(gsresult.CONTINUED_BY):  # (a local run's folder a resumed job went on writing)
        made += f", continued on Vertex AI by the job with key {record[gsresult.CONTINUED_BY]}"
    other = bool(record.get("name")) and record["name"] != plan.spec.name
    resume = f"to train on from that run on Vertex AI: --resume {plan.run}; a new run: another "
    resume += "--idempotency-key"
    raise UserError(
        f"{folder}, the folder of the idempotency key {plan.key}, holds a run {made}: a Vertex AI job there "
        "would write over its model and checkpoints; nothing was sent",
        # (--resume of another job's run would train this spec in that job's folder)
        hint="another --idempotency-key, or an output_dir of this spec's own" if other else resume,
    )


def hand_over(plan: SubmitPlan, settings: Settings) -> None:
    """A cloud job about to write a gs:// folder a local run wrote (a `--resume` of it, or the one
    folder of fixed_output_dir): that run's record (result.json, which a retry of its key adopts
    when it says SUCCEEDED) is replaced, just before the create, by one naming this job's key
    (local/gsresult.hand_over; exit 3 and nothing sent when it cannot be)."""
    folder = plan.resumed if plan.resumed is not None else plan.output if plan.spec.fixed_output_dir else None
    if folder is None or not folder.startswith("gs://"):
        return
    if settings.offline and not settings.storage_emulator:  # (no bucket to read, as _check_resumed)
        return
    if local_record(folder, settings) is None:  # (the usual case: no google-cloud-storage loaded)
        return
    gsresult.hand_over(settings, folder, run=plan.run, name=plan.spec.name, key=plan.key)


def _unreadable(_op: str, err: ApiError) -> bool:
    """A refusal to read (401, 403): told apart from a failure (ApiClient's `final` hook)."""
    return err.code in (401, 403)


def local_record(folder: str, settings: Settings) -> dict | None:
    """The record a local run left for the gs:// `folder` (gsresult.uri_of), read through the JSON
    API's client: a cloud submit does not load google-cloud-storage for this look. None when there
    is none, or this account may not read the bucket's objects (401/403: the job's account writes
    there). Any other failure, after the retries, is exit 3 with nothing sent: a look skipped on a
    passing error would let the job write over a local run and leave its SUCCEEDED record."""
    reader = storage.storage_api(
        settings, log=lambda _: None, retry=preflight.short_retry(settings), final=_unreadable
    )
    try:
        return storage.object_json(reader, gsresult.uri_of(folder), emulator=bool(settings.storage_emulator))
    except (Refused, Denied):  # this account may not read it: no record known
        return None
    except ServiceError as e:
        raise ServiceError(
            f"could not look for a run made here in {folder} ({e.message}); nothing was sent",
            hint="run the same command again; a job there would write over such a run",
        ) from None
