"""The names every layer agrees on (docs/contract.md sections 2-4). A leaf: it imports nothing of ours.

Label keys, the AIP_* variables Vertex AI sets in each replica, job states, the trainer's module
and the `Artifact` a job runs. Anything typed in two places belongs here instead.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from typing_extensions import Self  # (typing.Self from Python 3.11)

# -- labels every job carries (docs/contract.md section 3) ------------------------------------------------
KEY_LABEL = "vertex-trainer-key"  # the idempotency key
SPEC_LABEL = "vertex-trainer-spec"  # hash of the resolved spec
JOB_LABEL = "vertex-trainer-job"  # on a model version: the training job it came from
RESERVED_LABELS = (KEY_LABEL, SPEC_LABEL)
# On the jobs of a spec with scheduling.fallback (docs/contract.md section 8): which strategy of the plan,
# 1 = scheduling.strategy, 2 = fallback[0], ...; every attempt carries the same key label.
ATTEMPT_LABEL = "vertex-trainer-attempt"
# On a job that continues a run (submit --resume): a digest of the run's folder (folder_digest),
# so a later --resume finds every job still writing there, whatever its own key.
RESUMES_LABEL = "vertex-trainer-resumes"
MAX_USER_LABELS = 62  # Vertex allows 64; we add the two above

# -- what Vertex AI sets in every replica ---------------------------------------------------------
AIP_MODEL_DIR = "AIP_MODEL_DIR"
AIP_CHECKPOINT_DIR = "AIP_CHECKPOINT_DIR"
AIP_TENSORBOARD_LOG_DIR = "AIP_TENSORBOARD_LOG_DIR"
AIP_DIRS = {  # variable -> sub-directory of baseOutputDirectory
    AIP_MODEL_DIR: "model",
    AIP_CHECKPOINT_DIR: "checkpoints",
    AIP_TENSORBOARD_LOG_DIR: "logs",
}
VERTEX_ENV = (*AIP_DIRS, "CLUSTER_SPEC", "TF_CONFIG", "CLOUD_ML_JOB_ID")

# -- the trainer inside the image (docs/contract.md section 4) --------------------------------------------
TRAINER_MODULE = "trainer.task"
METRICS_FILE = "metrics.json"  # written by the chief beside the model directory
# A spec without `image:` runs only locally (the installed trainer): its rendered job names this.
LOCAL_IMAGE = "local/vertex-trainer-bundled-trainer:local"
SERVE_MODULE = "trainer.serve"  # the prediction server in the same image (deploy: auto)
SERVING_PORT = 8080  # AIP_HTTP_PORT Vertex AI gives the serving container
PREDICT_ROUTE = "/predict"
HEALTH_ROUTE = "/health"

# -- runs (docs/contract.md section 15) -------------------------------------------------------------
# Every submission runs in its own folder below the spec's output_dir (its base), as the SDK's
# base_output_dir does: <output_dir>/<run>/ holds model/, checkpoints/, logs/ and metrics.json, and
# is the CustomJob's baseOutputDirectory. The tool's own records of a run (the resolved spec, the
# CustomJob, its result and logs) are kept beside it, never in it: <parent>/.vertex-trainer/<run>/,
# so a script that empties its output folder empties only what is its own.
RECORDS_DIR = ".vertex-trainer"
RECORD_DIR = "vertex-trainer"  # where runs before the per-run folders kept their record (read only)
LATEST_LINK = "latest"  # <output_dir>/latest -> the newest local run's folder
RANDOM_KEY_PREFIX = "vt-"  # a key the tool made (vertex/names.new_key): vt-<UTC time>-<hex>
RANDOM_KEY_BODY = re.compile(r"[0-9]{8}-[0-9]{6}-[0-9a-f]{6}")  # what follows the prefix: <time>-<hex>


def run_name(name: str, key: str) -> str:
    """The folder of the submission with idempotency key `key` of the job `name`: `<name>-<key>`,
    or `<name>-<UTC time>-<hex>` for a key the tool made (`vt-<UTC time>-<hex>`: only that form
    loses its prefix, so a key of the user's that starts `vt-` names a folder of its own, never
    the one of the key without it). The same key names the same folder, so an adopted retry,
    every fallback attempt and a re-run with the key share it."""
    body = key.removeprefix(RANDOM_KEY_PREFIX)
    made = key.startswith(RANDOM_KEY_PREFIX) and RANDOM_KEY_BODY.fullmatch(body)
    return f"{name}-{body if made else key}"


def run_folder(output_dir: str, run: str) -> str:
    """`<output_dir>/<run>` (no trailing slash)."""
    return f"{output_dir.rstrip('/')}/{run}"


def folder_digest(folder: str) -> str:
    """A run folder as 32 hex characters of its sha256 (a label value; a lock's name): the same
    folder, with or without a trailing slash, the same digest."""
    return hashlib.sha256(folder.rstrip("/").encode()).hexdigest()[:32]


def records_of(run_dir: str) -> str:
    """Where the tool keeps its records of the run in `run_dir`: `<parent>/.vertex-trainer/<run>`."""
    parent, slash, run = run_dir.rstrip("/").rpartition("/")
    return f"{parent}{slash}{RECORDS_DIR}/{run}"  # (a bare name: beside it in the current directory)


# -- states (aiplatform_v1.JobState, PipelineState) ----------------------------------------------
@dataclass(frozen=True)
class States:
    """One family of resource states: the names by enum number (the REST transport may answer
    with numbers), the prefix every name carries, the terminal set and the one that succeeded."""

    prefix: str  # "JOB_STATE_"
    names: tuple[str, ...]  # the enum's names by number, without the prefix
    terminal: frozenset[str]  # full names
    succeeded: str

    def name(self, value: Any) -> str:
        """A full state name from a name or an enum number."""
        if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
            number = int(value)
            return self.prefix + (self.names[number] if number < len(self.names) else str(number))
        return value or f"{self.prefix}{self.names[0]}"

    def short(self, state: str) -> str:
        """JOB_STATE_RUNNING -> RUNNING."""
        return state.removeprefix(self.prefix)


def _states(prefix: str, names: str, terminal: str, succeeded: str = "SUCCEEDED") -> States:
    return States(
        prefix, tuple(names.split()), frozenset(prefix + n for n in terminal.split()), prefix + succeeded
    )


JOB_STATES = _states(
    "JOB_STATE_",
    "UNSPECIFIED QUEUED PENDING RUNNING SUCCEEDED FAILED CANCELLING "
    "CANCELLED PAUSED EXPIRED UPDATING PARTIALLY_SUCCEEDED",
    terminal="SUCCEEDED FAILED CANCELLED EXPIRED PARTIALLY_SUCCEEDED",
)
PIPELINE_STATES = _states(
    "PIPELINE_STATE_",
    "UNSPECIFIED QUEUED PENDING RUNNING SUCCEEDED FAILED CANCELLING CANCELLED PAUSED",
    terminal="SUCCEEDED FAILED CANCELLED",
)
SUCCEEDED = JOB_STATES.succeeded
TERMINAL_STATES = JOB_STATES.terminal

# Scheduling.Strategy names, by the spec's spelling.
STRATEGIES = {"standard": "STANDARD", "spot": "SPOT", "flex-start": "FLEX_START"}


def state_name(value: Any) -> str:
    """A JobState name from a name or an enum number."""
    return JOB_STATES.name(value)


def short_state(state: str) -> str:
    """JOB_STATE_RUNNING -> RUNNING (and PIPELINE_STATE_RUNNING -> RUNNING)."""
    return PIPELINE_STATES.short(JOB_STATES.short(state))


class JobState:
    """`done` and `succeeded`, for anything with a Vertex `state` (a cloud Job, a pipeline run, a
    local run): `states` names the family (JobState unless a subclass says otherwise)."""

    states: ClassVar[States] = JOB_STATES

    if TYPE_CHECKING:  # a field of some subclasses, a property of others

        @property
        def state(self) -> str: ...

    @property
    def done(self) -> bool:
        return self.state in self.states.terminal

    @property
    def succeeded(self) -> bool:
        return self.state == self.states.succeeded


class LocalRun(JobState):
    """A run on this machine that `submit` returns (api/results.LocalJob, tuning/tuning_run's
    LocalTuning): it has ended when `submit` returns (a local run never outlives the call), so
    `refresh` and `cancel` have nothing to ask; its submit object (docs/contract.md section 2)
    has no console page, and is adopted only when a retry with the same key found its run had
    SUCCEEDED here (api/results.LocalJob.adopted)."""

    if TYPE_CHECKING:  # fields of some subclasses, properties of others

        @property
        def name(self) -> str: ...

        @property
        def image(self) -> str | None: ...

        @property
        def idempotency_key(self) -> str: ...

    def refresh(self) -> Self:
        """Nothing to read again: the run ended before `submit` returned.

        Returns:
            self.
        """
        return self

    def cancel(self) -> Self:
        """Nothing to cancel: the run ended before `submit` returned (Ctrl-C stops one while it
        runs).

        Returns:
            self.
        """
        return self

    def submit_object(self, output_dir: str | None, metrics: dict[str, Any] | None) -> dict[str, Any]:
        """The docs/contract.md section 2 object of this run (`to_dict` adds what its kind has)."""
        return {
            "name": self.name,
            "state": self.state,
            "console_url": None,
            "image": self.image,
            "idempotency_key": self.idempotency_key,
            "adopted": bool(getattr(self, "adopted", False)),  # a local retry of a run that SUCCEEDED
            "output_dir": output_dir,
            "metrics": metrics,
        }


@dataclass(frozen=True)
class Artifact:
    """The code a job runs: a container image, or a Python package on a prebuilt executor image."""

    image_uri: str  # containerSpec.imageUri, or the executor image
    package_uris: tuple[str, ...] = ()  # non-empty -> pythonPackageSpec
    python_module: str = TRAINER_MODULE


# -- logs (docs/contract.md section 7): what `logs` and `--wait` show, from Cloud Logging or a local run --
@dataclass(frozen=True)
class LogEntry:
    """One entry of a job's log. `replica` is the task (workerpool0-0), or "service" for the
    service's own messages."""

    timestamp: str  # RFC 3339, UTC
    replica: str
    message: str
    severity: str = "DEFAULT"
    insert_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The `logs --output json` object."""
        return {
            "timestamp": self.timestamp,
            "replica": self.replica,
            "severity": self.severity,
            "message": self.message,
        }


@dataclass(frozen=True)
class JobEvent:
    """One fresh look at a followed job: `changed` when its state differs from the last look.
    `note` says more about the wait (a Flex Start job's time queued out of max_wait)."""

    job: JobState  # .state, .done, .succeeded
    changed: bool
    note: str | None = None

    @property
    def state(self) -> str:
        return self.job.state


@dataclass(frozen=True)
class Failure:
    """Why a followed job did not succeed: the service's message, the failing replica's last
    lines, and one line of advice for the usual causes."""

    message: str
    replica: str | None = None
    lines: tuple[str, ...] = ()
    advice: str | None = None
