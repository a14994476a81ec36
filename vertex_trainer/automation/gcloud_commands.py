"""The gcloud commands that deploy the function, its Eventarc trigger and the IAM they need.

Who does what (least privilege; docs/events.md draws it):

- the Cloud Storage service agent publishes the bucket's events: roles/pubsub.publisher;
- the trigger's service account receives them and calls the function: roles/eventarc.eventReceiver
  and roles/run.invoker on the function only (the function allows no unauthenticated call and
  only internal ingress: Eventarc in the same project is internal);
- the function's runtime service account starts runs: roles/aiplatform.user, read access to the
  buckets the spec names (the pre-flight bucket check), and actAs on the job's service account;
- for a pipeline (deploy:), the job's service account runs the pipeline's steps: it creates the
  CustomJob as itself, uploads and deploys (roles/aiplatform.user, actAs itself) and writes the
  pipeline root.

`plan()` is pure; `run()` executes a plan with subprocess, stopping at the first failure.

Quoting (issue 41): every value a person typed reaches deploy.sh as one `shlex.quote`d word; the
only shell expansions are the script's own captured variables (`var()`: a marker no value can
hold, since every name is checked against Google's grammar first, gcp/names.py, and NUL cannot
be in an argument), written as "${NAME}". Comment lines hold no value's line break or control
character (`_comment`).
"""

from __future__ import annotations

import hashlib
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from vertex_trainer.automation.storage_events import FINALIZED
from vertex_trainer.errors import ServiceError, UserError
from vertex_trainer.gcp import names
from vertex_trainer.log import Log

APIS = (
    "cloudfunctions.googleapis.com",
    "run.googleapis.com",
    "eventarc.googleapis.com",
    "cloudbuild.googleapis.com",
    "artifactregistry.googleapis.com",
    "pubsub.googleapis.com",
    "aiplatform.googleapis.com",
    "storage.googleapis.com",
)

RUNTIME = "python312"
_VAR = "\0"  # around a captured variable's name inside an argument: NUL is in no argument


def var(name: str) -> str:
    """A reference to the captured shell variable `name` (a step's `capture`) inside an argument."""
    return f"{_VAR}{name}{_VAR}"


GCS_AGENT, PROJECT_NUMBER = var("GCS_AGENT"), var("PROJECT_NUMBER")


@dataclass(frozen=True)
class Step:
    """One gcloud command. `unless`: skip it when this command succeeds (create-if-missing);
    `capture`: keep its output in this shell variable for later steps."""

    why: str
    argv: tuple[str, ...]
    unless: tuple[str, ...] = ()
    capture: str = ""

    def shell(self) -> str:
        line = _quote(self.argv)
        if self.capture:
            line = f'{self.capture}="$({line})"'
        if self.unless:
            line = f"{_quote(self.unless)} >/dev/null 2>&1 || {line}"
        return line


@dataclass(frozen=True)
class Deployment:
    """Everything `trigger deploy` needs to know (resolved by api.trigger_deploy); each name is
    checked against Google's grammar when it is made (exit 2 naming the flag)."""

    function: str
    project: str
    region: str  # where the function runs (the spec's region)
    trigger_location: str  # the bucket's location: Eventarc requires it
    bucket: str
    source: str  # the rendered function directory
    runtime_sa: str
    trigger_sa: str
    job_sa: str | None  # the spec's service_account
    read_buckets: tuple[str, ...]
    pipeline: bool
    pipeline_root_bucket: str | None = None

    def __post_init__(self) -> None:
        names.check_function(self.function, "--function")
        names.check_service_account(self.runtime_sa, "--runtime-service-account")
        names.check_service_account(self.trigger_sa, "--trigger-service-account")
        names.check_bucket(self.bucket, "--bucket")  # the spec's own buckets: quoted, as every word
        if self.job_sa:
            names.check_service_account(self.job_sa, "service_account")
        if self.trigger_location:
            names.check_location(self.trigger_location, "--trigger-location")
        if _VAR in self.source:
            raise UserError(f"-o {names.shown(self.source)}: not a directory name")


def _slug(text: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-") or "run"


def function_name(base: str) -> str:
    """vt-<base>: a valid function (Cloud Run service) name, at most 63 characters."""
    return f"vt-{_slug(base)}"[:63].rstrip("-")


def service_account(project: str, role: str, base: str) -> str:
    """vt-<role>-<short base>-<hash>@PROJECT: 6-30 characters, one per function and role."""
    digest = hashlib.sha256(base.encode()).hexdigest()[:4]
    short = _slug(base)[: 30 - len(f"vt-{role}--{digest}")].strip("-")
    return f"vt-{role}-{short}-{digest}".replace("--", "-") + f"@{project}.iam.gserviceaccount.com"


def plan(d: Deployment) -> list[Step]:
    p = f"--project={d.project}"
    steps = [
        Step("enable the APIs the flow uses", ("gcloud", "services", "enable", *APIS, p)),
        Step(
            "the Cloud Storage service agent, which publishes the bucket's events",
            ("gcloud", "storage", "service-agent", p),
            capture="GCS_AGENT",
        ),
        Step(
            "... may publish to Pub/Sub (Eventarc's transport)",
            _project_binding(d.project, f"serviceAccount:{GCS_AGENT}", "roles/pubsub.publisher"),
        ),
    ]
    for sa, what in (
        (d.runtime_sa, "the function's runtime identity: starts runs"),
        (d.trigger_sa, "the trigger's identity: receives events, calls the function"),
    ):
        steps.append(
            Step(
                f"service account: {what}",
                (
                    "gcloud",
                    "iam",
                    "service-accounts",
                    "create",
                    sa.split("@")[0],
                    p,
                    f"--display-name=vertex-trainer {d.function}",
                ),
                unless=("gcloud", "iam", "service-accounts", "describe", sa, p),
            )
        )
    steps += [
        Step(
            "the trigger's account receives events",
            _project_binding(d.project, f"serviceAccount:{d.trigger_sa}", "roles/eventarc.eventReceiver"),
        ),
        Step(
            "the runtime account creates Vertex AI jobs and pipelines",
            _project_binding(d.project, f"serviceAccount:{d.runtime_sa}", "roles/aiplatform.user"),
        ),
    ]
    for bucket in d.read_buckets:
        steps.append(
            Step(
                f"the runtime account reads gs://{bucket}'s metadata (pre-flight check)",
                (
                    "gcloud",
                    "storage",
                    "buckets",
                    "add-iam-policy-binding",
                    f"gs://{bucket}",
                    f"--member=serviceAccount:{d.runtime_sa}",
                    "--role=roles/storage.legacyBucketReader",
                    p,
                    "--condition=None",
                ),
            )
        )
    # A CustomJob without service_account runs as Vertex AI's own agent (no actAs needed); a
    # PipelineJob without one runs as the default compute account, which the caller must actAs.
    run_as = d.job_sa or (f"{PROJECT_NUMBER}-compute@developer.gserviceaccount.com" if d.pipeline else None)
    if run_as and not d.job_sa:
        steps.append(
            Step(
                "the project number (the default compute account runs the pipeline: the "
                "spec has no service_account)",
                ("gcloud", "projects", "describe", d.project, "--format=value(projectNumber)"),
                capture="PROJECT_NUMBER",
            )
        )
    if run_as:
        steps.append(
            Step(
                f"the runtime account may start runs as {run_as}",
                (
                    "gcloud",
                    "iam",
                    "service-accounts",
                    "add-iam-policy-binding",
                    run_as,
                    f"--member=serviceAccount:{d.runtime_sa}",
                    "--role=roles/iam.serviceAccountUser",
                    p,
                ),
            )
        )
    if d.pipeline and run_as:
        steps += [
            Step(
                "the pipeline's steps (running as the job's account) create, upload and deploy",
                _project_binding(d.project, f"serviceAccount:{run_as}", "roles/aiplatform.user"),
            ),
            Step(
                "... and start the training job as that same account",
                (
                    "gcloud",
                    "iam",
                    "service-accounts",
                    "add-iam-policy-binding",
                    run_as,
                    f"--member=serviceAccount:{run_as}",
                    "--role=roles/iam.serviceAccountUser",
                    p,
                ),
            ),
        ]
        if d.pipeline_root_bucket:
            steps.append(
                Step(
                    "... and write the pipeline root",
                    (
                        "gcloud",
                        "storage",
                        "buckets",
                        "add-iam-policy-binding",
                        f"gs://{d.pipeline_root_bucket}",
                        f"--member=serviceAccount:{run_as}",
                        "--role=roles/storage.objectUser",
                        p,
                        "--condition=None",
                    ),
                )
            )
    steps += [
        Step(
            "deploy the function with its Eventarc trigger (retries on: a failed call is redelivered)",
            (
                "gcloud",
                "functions",
                "deploy",
                d.function,
                "--gen2",
                p,
                f"--region={d.region}",
                f"--runtime={RUNTIME}",
                f"--source={d.source}",
                "--entry-point=on_object_finalized",
                f"--trigger-event-filters=type={FINALIZED}",
                f"--trigger-event-filters=bucket={d.bucket}",
                f"--trigger-location={d.trigger_location}",
                f"--trigger-service-account={d.trigger_sa}",
                f"--service-account={d.runtime_sa}",
                "--retry",
                "--no-allow-unauthenticated",
                "--ingress-settings=internal-only",
                "--memory=1Gi" if d.pipeline else "--memory=512Mi",
                "--timeout=300s",
                "--max-instances=10",
            ),
        ),
        Step(
            "only the trigger's account may call the function",
            (
                "gcloud",
                "functions",
                "add-invoker-policy-binding",
                d.function,
                f"--region={d.region}",
                f"--member=serviceAccount:{d.trigger_sa}",
                p,
            ),
        ),
    ]
    return steps


def _project_binding(project: str, member: str, role: str) -> tuple[str, ...]:
    return (
        "gcloud",
        "projects",
        "add-iam-policy-binding",
        project,
        f"--member={member}",
        f"--role={role}",
        "--condition=None",
        "--quiet",
    )


def script(d: Deployment, steps: Sequence[Step]) -> str:
    """The plan as a bash script (deploy.sh, and `trigger deploy --dry-run`)."""
    lines = [
        "#!/usr/bin/env bash",
        _comment(f"Deploys {d.function}: a Cloud Run function (gen2) on {FINALIZED}"),
        _comment(f"in gs://{d.bucket}, its Eventarc trigger and the IAM they need. Written by"),
        "# `vertex-trainer trigger render` / `trigger deploy --dry-run`; see docs/events.md.",
        "set -euo pipefail",
        "",
    ]
    for step in steps:
        lines += [_comment(re.sub(f"{_VAR}(\\w+){_VAR}", r"${\1}", step.why)), step.shell(), ""]
    return "\n".join(lines)


def _comment(text: str) -> str:
    """One comment line: a line break or control character in `text` is shown escaped."""
    return "# " + "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def run(
    steps: Sequence[Step],
    *,
    log: Log,
    runner: Callable[..., subprocess.CompletedProcess[Any]] = subprocess.run,
) -> dict[str, str]:
    """Run the steps in order; returns the captured variables. ServiceError on a failure."""
    if runner is subprocess.run and shutil.which("gcloud") is None:
        raise UserError(
            "trigger deploy runs the Google Cloud CLI, and gcloud is not on PATH",
            hint="install it (cloud.google.com/sdk), or print the commands with --dry-run",
        )
    captured: dict[str, str] = {}
    for step in steps:
        argv = [_expand(a, captured) for a in step.argv]
        if (
            step.unless
            and runner([_expand(a, captured) for a in step.unless], capture_output=True, text=True).returncode
            == 0
        ):
            log(f"ok (exists): {step.why}")
            continue
        log(f"$ {_quote(argv)}")
        done = runner(argv, capture_output=True, text=True)
        if done.returncode != 0:
            raise ServiceError(
                f"{step.why}: `{_quote(argv)}` exited {done.returncode}: "
                f"{(done.stderr or '').strip()[-800:]}",
                hint="fix the cause and run `vertex-trainer trigger deploy` again: "
                "every step is safe to repeat",
            )
        if step.capture:
            captured[step.capture] = (done.stdout or "").strip()
    return captured


def _expand(arg: str, captured: dict[str, str]) -> str:
    """`arg` with each var() replaced by its captured value (UserError for one not captured)."""
    parts = arg.split(_VAR)
    for i in range(1, len(parts), 2):
        if parts[i] not in captured:
            raise UserError(f"deploy plan: ${parts[i]} is used before a step captures it")
        parts[i] = captured[parts[i]]
    return "".join(parts)


def _word(arg: str) -> str:
    """One shell word: the literal parts `shlex.quote`d, each var() as "${NAME}"."""
    parts = arg.split(_VAR)
    if len(parts) % 2 == 0:
        raise ValueError(f"unbalanced variable marker in {arg!r}")
    out = [shlex.quote(p) if i % 2 == 0 else f'"${{{p}}}"' for i, p in enumerate(parts) if p or i % 2]
    return "".join(out) or "''"


def _quote(argv: Sequence[str]) -> str:
    return " ".join(_word(a) for a in argv)
