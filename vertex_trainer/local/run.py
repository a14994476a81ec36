"""run_local: one rendered CustomJob run on this machine, start to summary.

The orchestration over `cluster` (what to run), `supervisor` (the processes) and `display` (what
is shown), plus what a run leaves behind: the run record beside the outputs and `metrics.json`
read back into the `LocalResult`.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import json
import os
import secrets
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from vertex_trainer.contract import METRICS_FILE, SPEC_LABEL, SUCCEEDED, JobState
from vertex_trainer.errors import UserError
from vertex_trainer.gcp import storage
from vertex_trainer.local import cluster, gcsfill, gcsfuse, gsresult, layout, netns, owncode
from vertex_trainer.local.display import Display, default_console
from vertex_trainer.local.runlog import RESULT_FILE, RunLog
from vertex_trainer.local.supervisor import (
    INTERRUPT_GRACE_S,
    Interrupted,
    InterruptGuard,
    Process,
    Supervisor,
)
from vertex_trainer.redact import redact, redact_yaml
from vertex_trainer.settings import Settings
from vertex_trainer.spec import JobSpec
from vertex_trainer.spec.factory import runs_factory

if TYPE_CHECKING:
    from rich.console import Console

FAILED, CANCELLED = "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"
SETTLE_S = 1.0  # after a replica fails, how long the others get to fail too (see _supervise)


@dataclass
class LocalResult(JobState):
    """What a local run ended with. `state` is a Vertex JOB_STATE_* name; `exit_code` is the
    run's (0 succeeded, 1 otherwise); `failed_exit_code` is the failing replica's own."""

    name: str
    state: str
    output_dir: str
    model_dir: str
    metrics: dict[str, Any] | None
    exit_code: int
    failed_replica: str | None = None
    log_tail: list[str] = field(default_factory=list)
    job_id: str = ""
    replicas: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    failed_exit_code: int | None = None
    run: str = ""  # the run's name: its folder's, and its records' (docs/contract.md section 15)
    record_dir: str | None = None  # the tool's records of the run, beside its folder (local only)
    # Did the run write anything to AIP_MODEL_DIR? (None: not known, e.g. the run failed)
    model_written: bool | None = None
    # An earlier run of the same submission (its key) that had SUCCEEDED here, not run again
    adopted: bool = False

    # Each replica's CPU samples (supervisor.Process.cpu): the sandbox's CPU utilization series;
    # not part of the result's JSON.
    cpu: dict[str, list[tuple[float, float]]] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["cpu"]
        return d


def run_local(
    job: dict[str, Any],
    spec: JobSpec | str | None = None,
    *,
    settings: Settings,
    wait: bool = True,
    console: Console | None = None,
    cancel: Any = None,
    job_id: str | None = None,
    on_lines: Callable[[list[tuple[str, str]]], None] | None = None,
    summary: bool = True,
    code: owncode.Code | None = None,
    run: str | None = None,
    latest: bool = False,
    adopt: bool = False,
) -> LocalResult:
    """Run every worker-pool replica of the rendered CustomJob `job` as a local process.

    `spec` is only recorded (the JobSpec, or the YAML text) and, a JobSpec, consulted for
    `name`, `project` and `region`. `settings.environ` is the replicas' base environment (the
    process environment is never read here); `settings.storage_emulator` is used to read a
    gs:// metrics.json back.

    Returns when all replicas have ended (or one failed and the rest were stopped, or the user
    interrupted): state JOB_STATE_SUCCEEDED (exit_code 0), JOB_STATE_FAILED or
    JOB_STATE_CANCELLED (exit_code 1). Raises UserError before starting anything when the job
    cannot run here. `wait=False` only turns the live progress line off: a local job never
    outlives this call. Nothing is written to stdout (`console` defaults to stderr). `cancel`, a
    threading.Event, stops the run from another thread as Ctrl-C does (off the main thread,
    signals never reach it; e.g. the trials of a local tuning run). `job_id` is CLOUD_ML_JOB_ID
    (default: a `local-...` id); `on_lines` receives every batch of (replica, line) as shown
    (the sandbox turns them into Cloud Logging entries). `summary=False` leaves the summary of
    a run that succeeded (model, output, metrics) to the caller (the CLI prints it on stdout); a
    failure is still summarised on the console. `code` (local/owncode.py) runs a script job's code
    instead of the image's entrypoint; a script job's `spec` gives it by default.

    The run's folder is the job's baseOutputDirectory (the plan made it the submission's own,
    docs/contract.md section 15), or <tmp>/vertex-trainer/<name>/<run> without one; `run` names
    it there (default: the job id). The tool's records of the run go beside that folder
    (local/layout.py), never into it. `latest` points <base>/latest at the run (a submission's
    run; not a trial's).

    `adopt` (a submission's run, not a resumed one): when the run's folder already holds a run of
    that name that SUCCEEDED here (a retry with the same idempotency key), nothing runs again:
    that run's result is returned, `adopted`, as a cloud retry adopts the job its key made. A run
    whose records another runner still holds (the same key running in another process) is
    refused (UserError) before anything starts: two runs never write one folder. A gs:// folder's
    records are its result.json in the bucket, kept by a run that `run` names (local/gsresult.py).
    """
    model = spec if isinstance(spec, JobSpec) else None  # (a study's record keeps its text)
    name = str(job.get("displayName") or (model.name if model else None) or "local-job")
    project = (model.project if model else None) or settings.project
    region = (model.region if model else None) or settings.region
    console = console or default_console()
    environ = dict(settings.environ)
    submission = run is not None  # (a submission's run, new or resumed: it keeps a gs:// result)
    if adopt and run:
        found = _adopted(job, name, run, settings)
        if found is not None:
            earlier, theirs = found
            console.print(
                f"{run}: this submission (its idempotency key) already SUCCEEDED here, in "
                f"{earlier.output_dir}: adopted, nothing ran again (to train again: --resume {run}, "
                "or another --idempotency-key)",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
            ours = (job.get("labels") or {}).get(SPEC_LABEL)
            if theirs and ours and theirs != ours:  # as a cloud retry says (custom_jobs._warn_if_other_spec)
                console.print(
                    f"warning: adopting {run}, made with the same idempotency key from a different "
                    f"spec ({SPEC_LABEL} {theirs} != {ours}): the changed spec did not run; use a new "
                    "--idempotency-key to run it",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                    style="bold yellow",
                )
            if summary:
                Display(console, earlier.replicas, live=False).summary(earlier)
            return earlier

    job, skipped = cluster.without_reducers(job)  # Reduction Server runs on Vertex AI only
    if skipped:
        console.print(skipped, markup=False, highlight=False)
    cluster.pools_of(job)  # the job's shape, before touching the file system
    # Your own code (image.code, or what the sandbox found in the built artifact): its
    # directory, entry point and requirements, before anything starts.
    if code is None and model is not None and model.is_script_job:
        code = owncode.code_of(model)
    elif code is None and model is not None and runs_factory(model):  # the bundled trainer, your model
        code = owncode.factory_code(model)
    if code is not None:
        owncode.check_requirements(code)
    # The bundled trainer's /gcs/ flag values are read as gs:// (cluster.trainer_reads_gs); a
    # script job's code keeps them, for the stand-in below.
    if code is None or code.on_path:
        job, read_as = cluster.trainer_reads_gs(job, model)
        for line in read_as:
            console.print(line, markup=False, highlight=False)
    # /gcs/ as on Vertex AI (local/gcsfuse.py) for your own code, where this machine can mount
    # it; any other /gcs/ path (or any without the mount) is refused now.
    mount = code is not None and not code.on_path and gcsfuse.unavailable() is None
    if not mount:
        cluster.check_fuse(job, model, why=gcsfuse.unavailable())
    if cluster.references_gcs(job):
        cluster.check_gcs_route(environ)
    job_id = job_id or local_job_id()
    base = resolve_output(job, name, run or job_id)
    run = run or base.rsplit("/", 1)[-1]
    record = layout.record_dir(base)
    replicas = cluster.build_replicas(
        job, base, job_id=job_id, base_env=environ, project=project, region=region
    )
    if code is not None and code.on_path:
        replicas = owncode.path_replicas(code, replicas)
    elif code is not None:
        replicas = owncode.code_replicas(code, replicas)
    if code is None or code.on_path:
        cluster.check_importable(replicas)
    # The stand-in at /gcs, filled with the objects the replicas' /gcs/ paths name (gcsfill.py).
    standin = _standin(record) if mount else None
    fill = (
        gcsfill.fill_standin(job, model, base, standin, settings) if standin is not None else gcsfill.Fill()
    )
    if standin is not None:
        replicas = [dataclasses.replace(r, argv=tuple(gcsfuse.wrap(r.argv, str(standin)))) for r in replicas]
    # A cluster's servers listen on every interface: its replicas share a private network.
    replicas, network = _network(replicas, settings, console)
    held: int | None = None
    try:
        # Every check passed: the run's folder and its records, from now on (a refused run leaves none).
        if record is not None:
            held = hold_records(record, run, base)  # (released when this process ends, whatever ends it)
            os.makedirs(base, exist_ok=True)
            save_run_record(record, job, spec, job_id, run=run, run_dir=base)
            if latest:
                layout.link_latest(base)
        elif submission:  # a gs:// folder: held on this machine, its record says it runs
            if (lock := layout.gs_run_lock(base)) is not None:
                held = hold_records(lock, run, base)
            names = [r.name for r in replicas]
            gsresult.mark_running(settings, base, run=run, name=name, job_id=job_id, replicas=names)

        supervisor = Supervisor(
            replicas, cwd=str(code.directory) if code is not None and not code.on_path else None
        )
        display = Display(console, [r.name for r in replicas], live=wait)
        runlog = RunLog(record, [r.name for r in replicas])  # for `vertex-trainer logs RUN_DIR`
    except BaseException:
        if network is not None:
            network.stop()
        if held is not None:
            os.close(held)
        raise
    try:  # the records stay held until the run has ended, whatever ends it (a notebook lives on)
        shown = runlog.tee(display, on_lines)
        display.note(
            f"Running {name} locally: {len(replicas)} replica(s) "
            f"[{', '.join(r.name for r in replicas)}], output {base}"
        )
        if fill.line():
            display.note(str(fill.line()))
        state, failed = SUCCEEDED, None
        started = time.monotonic()
        with InterruptGuard() as guard, display:
            try:
                supervisor.start()
                failed = _supervise(supervisor, shown, cancel)
                state = FAILED if failed is not None else SUCCEEDED
            except (Interrupted, KeyboardInterrupt):
                state = CANCELLED
                display.note("Interrupted: stopping all replicas", style="bold yellow")
            finally:
                guard.disarm()
                cancelled = state == CANCELLED
                # Ctrl-C: every replica's group at once, killed after a short grace (a trainer saves a
                # checkpoint on SIGTERM; the user asked to stop, not to wait for it).
                supervisor.stop(INTERRUPT_GRACE_S if cancelled else None)
                if network is not None:
                    network.stop()
                # Whatever the readers queued after the loop: the failing replica's last words are
                # shown; after Ctrl-C the replicas' dying output (epochs that were still running, a
                # collective's "aborted" traceback) goes only to the run's log.
                last = supervisor.lines(timeout=0)
                if cancelled:
                    runlog.write(last)
                    if on_lines is not None and last:
                        on_lines(last)
                else:
                    shown.lines(last)

        if standin is not None and base.startswith("gs://"):
            gcsfill.upload_standin(standin, settings, display.note, fill)
        model_dir = cluster.output_dirs(base)["AIP_MODEL_DIR"]
        result = LocalResult(
            name=name,
            state=state,
            output_dir=base,
            model_dir=model_dir,
            metrics=read_metrics(base, settings) if state == SUCCEEDED else None,
            exit_code=0 if state == SUCCEEDED else 1,
            failed_replica=failed.name if failed is not None else None,
            log_tail=failed.tail.excerpt() if failed is not None else [],
            job_id=job_id,
            replicas=[r.name for r in replicas],
            elapsed_s=round(time.monotonic() - started, 3),
            failed_exit_code=failed.returncode if failed is not None else None,
            run=run,
            record_dir=record,
            cpu={p.name: list(p.cpu) for p in supervisor.processes},
            model_written=_written(model_dir, settings) if state == SUCCEEDED else None,
        )
        runlog.close(result)
        if submission and base.startswith("gs://"):
            gsresult.keep(result, settings, display.note, spec=(job.get("labels") or {}).get(SPEC_LABEL))
        if summary or state != SUCCEEDED:
            display.summary(result)
        return result
    finally:
        if held is not None:
            os.close(held)


def _network(
    replicas: list[cluster.Replica], settings: Settings, console: Console
) -> tuple[list[cluster.Replica], netns.Network | None]:
    """The replicas as they run, in their private network (started here; None: this machine's
    network, said in one line when they are a cluster, local/netns.py). UserError when the
    network cannot start."""
    replicas, network, chosen = netns.prepare(replicas, settings.replica_network)
    if chosen.line:
        console.print(chosen.line, markup=False, highlight=False, style="bold yellow")
    if network is None:
        return replicas, None
    for rep in replicas:  # nsenter runs the command: say what Popen would have said
        if shutil.which(rep.argv[0]) is None:
            missing = not os.path.exists(rep.argv[0]) or os.sep not in rep.argv[0]
            raise UserError(
                f"{rep.name}: cannot start {rep.argv[0]!r}: "
                f"{os.strerror(errno.ENOENT if missing else errno.EACCES)}",
                hint="containerSpec.command runs from the local environment",
            )
    try:
        network.start()
    except RuntimeError as exc:
        raise UserError(
            str(exc), hint="VERTEX_TRAINER_REPLICA_NETWORK=host runs them on this machine's network"
        ) from None
    return [dataclasses.replace(r, argv=tuple(network.wrap(r.argv))) for r in replicas], network


class _Shows(Protocol):
    """Where the replicas' lines go: the Display, or RunLog.tee's copy to the record too."""

    def lines(self, items: list[tuple[str, str]]) -> None: ...

    def tick(self) -> None: ...


def _standin(record: str | None) -> Path:
    """The directory bind-mounted at /gcs: the stand-in for the buckets of a local base's runs,
    beside their records (<base>/.vertex-trainer/gcs: what one run writes there the next one
    reads, as from a bucket), or a scratch directory uploaded to the buckets when a run that
    writes to Cloud Storage ends."""
    if record is None:
        return Path(tempfile.mkdtemp(prefix="vertex-trainer-gcs-"))
    path = Path(record).parent / layout.STANDIN_DIR
    path.mkdir(parents=True, exist_ok=True)
    return path


def hold_records(record: str, run: str, base: str) -> int:
    """Hold the run's records for this runner (an exclusive flock on <records>/runner.lock, which
    the kernel releases when the runner ends, even SIGKILLed); UserError when another runner holds
    them: a second submit with the same key while the first still runs."""
    os.makedirs(record, exist_ok=True)
    fd = os.open(os.path.join(record, layout.LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # held by another runner
        os.close(fd)
        raise UserError(
            f"run {run} is already running on this machine (another submit --local with the same "
            f"idempotency key writes to {base}): a second run would write the same model and checkpoints",
            hint="wait for it to end"
            + ("" if base.startswith("gs://") else f" (vertex-trainer logs {shlex.quote(base)} --follow)")
            + ", or submit with another --idempotency-key",
        ) from None
    except OSError:
        pass  # no flock here (some network file systems): nothing to hold, nothing refused
    return fd


def _adopted(
    job: dict[str, Any], name: str, run: str, settings: Settings
) -> tuple[LocalResult, str | None] | None:
    """The result of the run named `run` in the job's folder when its records say it SUCCEEDED
    (run.json names that run, result.json says so), as a LocalResult `adopted`, and the spec hash
    it ran (its SPEC_LABEL; None when not recorded); else None."""
    base = resolve_output(job, name, run)
    if base.startswith("gs://"):
        return _adopted_gs(base, name, run, settings)
    record = layout.record_dir(base)
    if record is None or not os.path.isdir(base) or not os.listdir(base):  # (removed or emptied:
        return None  # nothing left to adopt, as for a gs:// folder)
    try:
        with open(os.path.join(record, layout.RUN_FILE), encoding="utf-8") as f:
            kept = json.load(f)
        with open(os.path.join(record, RESULT_FILE), encoding="utf-8") as f:
            ended = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or not isinstance(ended, dict):
        return None
    if kept.get("run") == run:
        _refuse_other_job(base, run, ended.get("name"), name)
    if kept.get("run") != run or ended.get("state") != SUCCEEDED:
        return None
    ended["job_id"] = ended.get("job_id") or kept.get("job_id")
    try:  # the CustomJob it ran, with its spec's label
        with open(os.path.join(record, "custom_job.json"), encoding="utf-8") as f:
            theirs = (json.load(f).get("labels") or {}).get(SPEC_LABEL)
    except (OSError, ValueError, AttributeError):
        theirs = None
    return _adopted_result(base, name, run, ended, record, settings), theirs


def _adopted_gs(base: str, name: str, run: str, settings: Settings) -> tuple[LocalResult, str | None] | None:
    """`_adopted` for a gs:// folder: its result.json in the bucket names the run and says it
    SUCCEEDED, and the folder still holds objects; else None (also when Cloud Storage cannot say).
    No route to Cloud Storage: the UserError the run would have met."""
    from google.api_core.exceptions import GoogleAPIError

    cluster.check_gcs_route(settings.environ)
    try:
        ended = gsresult.read(settings, base)
        gsresult.refuse_foreign(settings, base, run, ended)  # a Vertex AI job's folder: exit 2
        if ended is not None and ended.get("run") == run:
            _refuse_other_job(base, run, ended.get("name"), name)
        if ended is None or ended.get("run") != run or ended.get("state") != SUCCEEDED:
            return None
        if not storage.holds_objects(settings, base):  # (its folder emptied: nothing left to adopt)
            return None
    except (GoogleAPIError, OSError):
        return None
    return _adopted_result(base, name, run, ended, None, settings), ended.get("spec")


def _refuse_other_job(base: str, run: str, theirs: Any, name: str) -> None:
    """The run's folder holds a run of another job (its record's name): two specs that share
    output_dir meet in one folder name when one's name and key end as the other's do (digits with
    the key v2-ci-7, digits-v2 with ci-7); exit 2, nothing runs, nothing adopted."""
    if not theirs or theirs == name:
        return
    raise UserError(
        f"{run}: {base} holds a run of the job {str(theirs)!r}, not of {name!r} (two specs with one "
        "output_dir whose names and keys make the same folder name): it is neither adopted nor "
        "written over; nothing ran",
        hint="submit with another --idempotency-key, or give each spec an output_dir of its own "
        "(e.g. output_dir: gs://BUCKET/runs/{{ name }})",
    )


def _adopted_result(
    base: str, name: str, run: str, ended: dict[str, Any], record: str | None, settings: Settings
) -> LocalResult:
    """The LocalResult of an adopted run that SUCCEEDED, from its result's fields (`ended`)."""
    model_dir = cluster.output_dirs(base)["AIP_MODEL_DIR"]
    replicas = ended.get("replicas")
    return LocalResult(
        name=str(ended.get("name") or name),
        state=SUCCEEDED,
        output_dir=base,
        model_dir=model_dir,
        metrics=read_metrics(base, settings),
        exit_code=0,
        job_id=str(ended.get("job_id") or ""),
        replicas=[str(r) for r in replicas] if isinstance(replicas, list) else [],
        elapsed_s=float(ended.get("elapsed_s") or 0.0),
        run=run,
        record_dir=record,
        model_written=_written(model_dir, settings),
        adopted=True,
    )


def _written(model_dir: str, settings: Settings) -> bool | None:
    """Whether anything is in `model_dir` (a local folder, or a gs:// prefix listed through the
    run's storage route); None when Cloud Storage cannot say."""
    if not model_dir.startswith("gs://"):
        path = Path(model_dir)
        return path.is_dir() and any(path.iterdir())
    from google.api_core.exceptions import GoogleAPIError

    try:
        return storage.holds_objects(settings, model_dir)
    except (GoogleAPIError, OSError):
        return None


def _supervise(supervisor: Supervisor, display: _Shows, cancel: Any = None) -> Process | None:
    """Show lines until every replica has ended (None) or one has failed (that one)."""
    while True:
        if cancel is not None and cancel.is_set():
            raise Interrupted("cancelled")
        display.lines(supervisor.lines(timeout=0.2))
        if supervisor.failures():
            # Replicas of one job often fail together (a worker's error reaches the chief
            # through the collectives within moments): let the others settle briefly, then
            # blame the replica that ended first.
            settle = time.monotonic() + SETTLE_S
            while time.monotonic() < settle and not supervisor.all_ended():
                display.lines(supervisor.lines(timeout=0.1))
            return supervisor.failures()[0]
        if supervisor.all_ended():
            return None
        display.tick()


def resolve_output(job: dict[str, Any], name: str, run: str) -> str:
    """The run's folder: the job's baseOutputDirectory (gs:// as is; a local path made absolute,
    created once the run's checks passed), or, when it names none,
    <tmp>/vertex-trainer/<name>/<run>. /gcs/ (Cloud Storage FUSE) is refused."""
    spec = cluster.job_spec_of(job)
    base = ((spec.get("baseOutputDirectory") or {}).get("outputUriPrefix") or "").strip()
    if not base:
        base = layout.default_run_dir(name, run)
    if base.startswith("gs://"):
        return base.rstrip("/")
    if base.startswith("/gcs/"):
        raise UserError(
            f"output directory {base!r} is a Cloud Storage FUSE path, which exists only on Vertex AI",
            hint="use a local path or gs:// for local runs",
        )
    return os.path.abspath(os.path.expanduser(base.removeprefix("file://"))).rstrip("/")


def save_run_record(
    record: str,
    job: dict[str, Any],
    spec: JobSpec | str | None,
    job_id: str,
    *,
    run: str,
    run_dir: str,
    body_file: str = "custom_job.json",
) -> None:
    """Keep what ran, in the run's records (beside its folder, local/layout.py): run.json,
    the body (`body_file`: custom_job.json, or a local study's hyperparameter_tuning_job.json)
    and spec.yaml (`spec`: the JobSpec or the YAML text; None: no spec.yaml). A
    cloud job's CustomJob is kept by Vertex AI. Both copies show env values and flags whose names
    look secret as `***` (vertex_trainer/redact.py): the replicas got the real ones, the records
    are for reading."""
    model = spec if isinstance(spec, JobSpec) else None  # (a YAML text as given: no field read)
    layout.write_run_file(
        record,
        run=run,
        run_dir=run_dir,
        job_id=job_id,
        region=model.region if model else None,
        max_cost=model.scheduling.max_cost if model else None,
    )
    with open(os.path.join(record, body_file), "w", encoding="utf-8") as f:
        json.dump(redact(job), f, indent=2)
        f.write("\n")
    text = spec.to_yaml() if isinstance(spec, JobSpec) else spec
    if text is not None:
        with open(os.path.join(record, "spec.yaml"), "w", encoding="utf-8") as f:
            f.write(redact_yaml(text))


def read_metrics(base_output: str, settings: Settings) -> dict[str, Any] | None:
    """metrics.json from the base output directory (local path or gs://); None when it is
    absent or unreadable (a finished run must not turn into a crash over its metrics)."""
    path = f"{base_output.rstrip('/')}/{METRICS_FILE}"
    try:
        if path.startswith("gs://"):
            return storage.read_json(settings, path)
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
        return value if isinstance(value, dict) else None
    except Exception:
        return None


def local_job_id() -> str:
    """CLOUD_ML_JOB_ID for a local run: Vertex ids are numbers; this one says what it is."""
    return f"local-{time.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(3)}"
