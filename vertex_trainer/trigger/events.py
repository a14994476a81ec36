"""Which storage events start a run, and under which idempotency key (docs/contract.md section 6). Pure.

Eventarc calls the function once per finalized object (a 2 TB upload is thousands of calls), at
least once each (a call may come again). So:

- only `<prefix><folder>/<marker>` starts a run, for `<folder>`; every other object is ignored;
- the idempotency key is derived from (bucket, object, generation): a redelivered event finds
  the run it started (the event id is not used: a redelivery may carry another one), and a new
  generation of the marker (uploaded again) is a new run.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vertex_trainer.errors import UserError

FINALIZED = "google.cloud.storage.object.v1.finalized"
CONFIG_FILE = "trigger.json"
SPEC_FILE = "spec.yaml"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")


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

    def __post_init__(self) -> None:
        check_trigger_args(self.bucket, self.prefix, self.marker)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def load(cls, directory: str | Path) -> TriggerConfig:
        data = json.loads((Path(directory) / CONFIG_FILE).read_text())
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def check_trigger_args(bucket: str, prefix: str, marker: str) -> None:
    """--bucket, --prefix and --marker as Cloud Storage names (exit 2)."""
    if bucket.startswith("gs://"):
        raise UserError(
            f"--bucket {bucket!r}: give the bucket's name, without gs://",
            hint=f"--bucket {bucket[5:].split('/', 1)[0]}",
        )
    if not _BUCKET.match(bucket or ""):
        raise UserError(
            f"--bucket {bucket!r} is not a bucket name (3-222 characters of a-z, 0-9, '-', '_' and '.')"
        )
    if prefix.startswith("/") or "//" in prefix:
        raise UserError(
            f"--prefix {prefix!r}: an object name prefix has no leading or double '/'",
            hint="e.g. --prefix datasets/",
        )
    if not marker or "/" in marker or marker in (".", ".."):
        raise UserError(f"--marker {marker!r}: the marker is an object's last name part, e.g. _SUCCESS")


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
        bucket = str(data.get("bucket") or attributes.get("bucket") or "")
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

    @property
    def starts_run(self) -> bool:
        return self.folder is not None

    @property
    def key(self) -> str:
        return event_key(self.event.bucket, self.event.name, self.event.generation)

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
    """Does this event start a run? Only a finalized `<prefix><folder>/<marker>` in the bucket."""
    if event.type and event.type != FINALIZED:
        return Decision(event, reason=f"event type {event.type}, not {FINALIZED}")
    if event.bucket != config.bucket:
        return Decision(event, reason=f"bucket {event.bucket}, not {config.bucket}")
    if not event.name.startswith(config.prefix):
        return Decision(event, reason=f"outside the prefix {config.prefix!r}")
    rest = event.name[len(config.prefix) :]
    folder, sep, last = rest.rpartition("/")
    if last != config.marker:
        return Decision(event, reason=f"not a {config.marker} marker")
    if not sep or not folder.strip("/"):
        return Decision(event, reason=f"a {config.marker} directly under the prefix names no folder")
    return Decision(event, folder=folder, prefix=config.prefix)


def event_key(bucket: str, name: str, generation: str) -> str:
    """The idempotency key of one object generation: a valid label value and pipelineJobId."""
    digest = hashlib.sha256(f"gs://{bucket}/{name}#{generation}".encode()).hexdigest()
    return f"ev-{digest[:24]}"


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
