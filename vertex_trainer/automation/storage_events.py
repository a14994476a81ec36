"""Which storage events start a run, and under which idempotency key (docs/contract.md section 6). Pure.

Eventarc calls the function once per finalized object (a 2 TB upload is thousands of calls), at
least once each (a call may come again). So:

- only `<prefix><folder>/<marker>` starts a run, for `<folder>`; every other object is ignored;
- the idempotency key is derived from (bucket, object, generation): a redelivered event finds
  the run it started (the event id is not used: a redelivery may carry another one), and a new
  generation of the marker (uploaded again) is a new run;
- an event that is not a finalized object of the trigger's bucket (no CloudEvent type, another
  type, another bucket, two buckets named) starts nothing, and neither does a marker whose folder
  is not exactly one folder of the bucket: a ',' (the trainer splits its data paths on commas),
  a glob wildcard, a control character, an empty, '.' or '..' part (issue 41);
- every run carries the folder's label (`FOLDER_LABEL`): the function counts the folder's runs
  by it and starts at most `max_runs_per_folder` in `folder_window` (api.on_object_finalized).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vertex_trainer.durations import fmt_duration, parse_duration
from vertex_trainer.errors import UserError
from vertex_trainer.gcp import names

FINALIZED = "google.cloud.storage.object.v1.finalized"
CONFIG_FILE = "trigger.json"
SPEC_FILE = "spec.yaml"
# On every run the function starts: which folder it is for (a digest: a valid label value).
FOLDER_LABEL = "vertex-trainer-folder"
MAX_RUNS_PER_FOLDER = 3  # runs of one folder in one window: re-uploads of its marker beyond
FOLDER_WINDOW = "24h"  # are acknowledged and start nothing
_SOURCE = re.compile(r"^//storage\.googleapis\.com/projects/_/buckets/([^/]+)$")


class BadEvent(ValueError):
    """An event that is not a Cloud Storage object event (acknowledged, never retried)."""


@dataclass(frozen=True)
class TriggerConfig:
    """What `trigger render` decided, saved beside the function as trigger.json."""

    bucket: str
    prefix: str = ""
    marker: str = "_SUCCESS"
    spec_file: str = SPEC_FILE
    vars: dict[str, Any] = field(default_factory=dict)  # --var values and a pinned {{ git_sha }}
    image: str = ""
    pipeline: bool = False  # the spec has deploy: -> a PipelineJob
    version: str = ""
    max_runs_per_folder: int = MAX_RUNS_PER_FOLDER
    folder_window: str = FOLDER_WINDOW

    def __post_init__(self) -> None:
        check_trigger_args(self.bucket, self.prefix, self.marker)
        check_cap(self.max_runs_per_folder, self.folder_window)

    @property
    def window_seconds(self) -> int:
        return parse_duration(self.folder_window)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def load(cls, directory: str | Path) -> TriggerConfig:
        data = json.loads((Path(directory) / CONFIG_FILE).read_text())
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def check_trigger_args(bucket: str, prefix: str, marker: str) -> None:
    """--bucket, --prefix and --marker by Cloud Storage's grammar, and what the trainer would
    split or glob refused (exit 2; gcp/names.py)."""
    names.check_bucket(bucket or "", "--bucket")
    names.check_prefix(prefix, "--prefix")
    names.check_marker(marker, "--marker")


def check_cap(max_runs: int, window: str) -> None:
    """--max-runs-per-folder (1-1000) and --folder-window (1m-30d) (exit 2)."""
    if isinstance(max_runs, bool) or not isinstance(max_runs, int) or not 1 <= max_runs <= 1000:
        raise UserError(
            f"--max-runs-per-folder {max_runs!r}: a whole number from 1 to 1000",
            hint=f"the default, {MAX_RUNS_PER_FOLDER}, allows that many runs of one folder a day",
        )
    try:
        seconds = parse_duration(window)
    except ValueError as exc:
        raise UserError(f"--folder-window {window!r}: {exc}", hint="e.g. 24h, 7d or 30m") from None
    if not 60 <= seconds <= 30 * 86400:
        raise UserError(
            f"--folder-window {window!r}: from 1m to 30d (got {fmt_duration(seconds)})", hint="e.g. 24h"
        )


@dataclass(frozen=True)
class ObjectEvent:
    """The parts of a finalized-object CloudEvent that matter here."""

    event_id: str
    type: str
    bucket: str
    name: str
    generation: str

    @classmethod
    def from_cloud_event(cls, event: Any) -> ObjectEvent:
        """From a cloudevents CloudEvent (what functions-framework passes) or a dict with
        `attributes` and `data`. `data` is the StorageObjectData JSON."""
        if isinstance(event, Mapping):
            attributes, data = dict(event.get("attributes") or {}), event.get("data")
        else:
            attributes, data = dict(event.get_attributes()), event.data
        if isinstance(data, (bytes, str)):
            try:
                data = json.loads(data or b"null")
            except ValueError:
                raise BadEvent("the event's data is not JSON") from None
        if not isinstance(data, Mapping):
            raise BadEvent("the event has no StorageObjectData")
        subject = str(attributes.get("subject") or "")
        name = str(data.get("name") or subject.removeprefix("objects/"))
        source = _SOURCE.match(str(attributes.get("source") or ""))
        claims = {  # every place the event names its bucket: they must agree
            str(b) for b in (data.get("bucket"), attributes.get("bucket"), source and source.group(1)) if b
        }
        if len(claims) > 1:
            raise BadEvent(f"the event names more than one bucket ({', '.join(sorted(map(ascii, claims)))})")
        if subject.startswith("objects/") and data.get("name") and subject != f"objects/{data['name']}":
            raise BadEvent("the event's subject and data name different objects")
        bucket = claims.pop() if claims else ""
        generation = str(data.get("generation") or "")
        if not name or not bucket or not generation.isdigit():
            raise BadEvent(
                f"the event lacks the object's bucket, name or generation "
                f"(bucket={bucket!r}, name={name!r}, generation={generation!r})"
            )
        return cls(
            str(attributes.get("id") or ""), str(attributes.get("type") or ""), bucket, name, generation
        )


@dataclass(frozen=True)
class Decision:
    """What to do with one event: `folder` is set when it starts a run, else `reason` says why
    it is ignored."""

    event: ObjectEvent
    folder: str | None = None
    reason: str = ""
    prefix: str = ""
    warn: bool = False  # ignored, and worth a look: logged as a WARNING, not a DEBUG line

    @property
    def starts_run(self) -> bool:
        return self.folder is not None

    @property
    def key(self) -> str:
        return event_key(self.event.bucket, self.event.name, self.event.generation)

    @property
    def folder_label(self) -> str:
        """The value of FOLDER_LABEL on this folder's runs."""
        return folder_label(self.event.bucket, self.prefix, self.folder or "")

    def template_vars(self) -> dict[str, str]:
        """`{{ trigger.* }}` for the spec (docs/contract.md section 6)."""
        return trigger_vars(
            self.event.bucket, self.event.name, self.event.generation, self.prefix, self.folder or ""
        )

    def to_log(self) -> dict[str, Any]:
        e = self.event
        out = {"bucket": e.bucket, "object": e.name, "generation": e.generation, "event_id": e.event_id}
        if self.starts_run:
            out.update(folder=self.template_vars()["folder"], idempotency_key=self.key)
        else:
            out["ignored"] = self.reason
        return out


def decide(config: TriggerConfig, event: ObjectEvent) -> Decision:
    """Does this event start a run? Only a finalized `<prefix><folder>/<marker>` in the bucket,
    whose folder is one folder of it (`names.folder_problem`)."""
    if event.type != FINALIZED:
        what = f"event type {names.shown(event.type)}" if event.type else "an event without a type"
        return Decision(event, reason=f"{what}, not {FINALIZED}", warn=True)
    if event.bucket != config.bucket:
        return Decision(event, reason=f"bucket {names.shown(event.bucket)}, not {config.bucket}", warn=True)
    if not event.name.startswith(config.prefix):
        return Decision(event, reason=f"outside the prefix {config.prefix!r}")
    rest = event.name[len(config.prefix) :]
    folder, sep, last = rest.rpartition("/")
    if last != config.marker:
        return Decision(event, reason=f"not a {config.marker} marker")
    if not sep or not folder.strip("/"):
        return Decision(event, reason=f"a {config.marker} directly under the prefix names no folder")
    problem = names.folder_problem(folder)
    if problem:
        return Decision(
            event, reason=f"{problem}: no run (it would read other data than the folder's)", warn=True
        )
    return Decision(event, folder=folder, prefix=config.prefix)


def event_key(bucket: str, name: str, generation: str) -> str:
    """The idempotency key of one object generation: a valid label value and pipelineJobId."""
    digest = hashlib.sha256(f"gs://{bucket}/{name}#{generation}".encode()).hexdigest()
    return f"ev-{digest[:24]}"


def folder_label(bucket: str, prefix: str, folder: str) -> str:
    """FOLDER_LABEL's value for gs://BUCKET/<prefix><folder>: a digest, a valid label value."""
    return "f-" + hashlib.sha256(f"gs://{bucket}/{prefix}{folder}".encode()).hexdigest()[:24]


def trigger_vars(bucket: str, name: str, generation: str, prefix: str, folder: str) -> dict[str, str]:
    return {
        "bucket": bucket,
        "object": name,
        "generation": str(generation),
        "folder": f"gs://{bucket}/{prefix}{folder}",
        "folder_name": folder,
    }


def sample_vars(bucket: str, prefix: str, marker: str) -> dict[str, str]:
    """`{{ trigger.* }}` for a made-up marker, to check a spec before any event exists."""
    return trigger_vars(bucket, f"{prefix}example/{marker}", "1", prefix, "example")
