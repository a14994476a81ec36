"""The `vertex-trainer` command line: a thin typer layer over the Python API.

One small function per command; each loads the spec once and hands the object down. Heavy
libraries (tensorflow, google.cloud.*) are imported only inside the commands that need them.
"""

from __future__ import annotations

import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
from typing_extensions import Annotated

from vertex_trainer.errors import UserError, VertexTrainerError
from vertex_trainer.submit import short_state  # light: stdlib only until a request is made

app = typer.Typer(
    name="vertex-trainer",
    help="From a YAML spec to a Vertex AI CustomJob (GPU/TPU, Spot, Flex Start), and the same job on this machine.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
data_app = typer.Typer(help="Make TFRecord datasets in the layout the trainer reads.", no_args_is_help=True)
dev_app = typer.Typer(help="Local stand-ins for Google Cloud services (for tests and offline runs).",
                      no_args_is_help=True)
app.add_typer(data_app, name="data")
app.add_typer(dev_app, name="dev")

# ---- shared options ---------------------------------------------------------------------------
SpecPath = Annotated[Path, typer.Argument(help="the job spec (YAML)", show_default=False)]
SetOpt = Annotated[Optional[List[str]], typer.Option(
    "--set", metavar="KEY=VALUE", help="override a spec field, e.g. --set trainer.batch_size=4096", show_default=False)]
VarOpt = Annotated[Optional[List[str]], typer.Option(
    "--var", metavar="KEY=VALUE", help="a template variable for {{ KEY }} in the spec", show_default=False)]
ProjectOpt = Annotated[Optional[str], typer.Option("--project", help="Google Cloud project (wins over the spec)")]
RegionOpt = Annotated[Optional[str], typer.Option("--region", help="Vertex AI region (wins over the spec)")]
# For commands that take a job, not a spec.
JobProjectOpt = Annotated[Optional[str], typer.Option(
    "--project", help="Google Cloud project (default: $GOOGLE_CLOUD_PROJECT, then gcloud's)")]
JobRegionOpt = Annotated[Optional[str], typer.Option(
    "--region", help="Vertex AI region (default: gcloud's ai/region; not needed with a full job name)")]


class OutputFormat(str, Enum):
    text = "text"
    json = "json"


class RenderFormat(str, Enum):
    json = "json"
    yaml = "yaml"
    gcloud = "gcloud"
    spec = "spec"


OutputOpt = Annotated[OutputFormat, typer.Option("--output", "-o", help="text for people, json for scripts")]


def load(spec: Path, set_: list[str] | None, var: list[str] | None, project: str | None, region: str | None):
    """Load the spec the way every command does (file < --set < --project/--region)."""
    from vertex_trainer.spec import load_spec, parse_assignments

    variables = dict(parse_assignments(var, "--var"))
    return load_spec(spec, sets=set_ or (), vars=variables, project=project, region=region)


def planned_artifact(spec):
    """The artifact a cloud run would use, computed without network (content hash only)."""
    from vertex_trainer.render import default_artifact

    if not spec.image.builds:
        return default_artifact(spec)
    from vertex_trainer import package

    return package.plan_artifact(spec)


def emit_json(obj) -> None:
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")


def err_console():
    from rich.console import Console

    return Console(stderr=True, highlight=False)


# ---- foundation commands ------------------------------------------------------------------------
@app.command()
def validate(spec: SpecPath, set_: SetOpt = None, var: VarOpt = None, project: ProjectOpt = None,
             region: RegionOpt = None) -> None:
    """Check a job spec (fields, hardware, scheduling) without sending anything."""
    job = load(spec, set_, var, project, region)
    s = job.scheduling
    from vertex_trainer.hardware import fmt_duration

    wait = f", max wait {fmt_duration(s.max_wait)}" if s.max_wait is not None else ""
    preset = f"{job.hardware.preset}: " if job.hardware.preset else ""
    image = job.image.uri or job.image.repository or "python package"
    lines = [
        f"OK  {spec}: {job.name}",
        f"  where     {job.project or '(no project yet)'} / {job.region}",
        f"  hardware  {preset}{job.hardware.describe()} x {job.replicas} machine(s) = {job.total_devices} replica(s)",
        f"  schedule  {s.strategy}{wait}" + (f", timeout {fmt_duration(s.timeout)}" if s.timeout else ""),
        f"  image     {image}",
        f"  trainer   {job.trainer.model} on {job.trainer.train_data}",
    ]
    print("\n".join(lines))


@app.command()
def render(spec: SpecPath, set_: SetOpt = None, var: VarOpt = None, project: ProjectOpt = None,
           region: RegionOpt = None,
           format: Annotated[RenderFormat, typer.Option("--format", "-f", help="json: the REST body; yaml; "
                             "gcloud: a --config file for gcloud ai custom-jobs create; spec: the resolved spec")]
           = RenderFormat.json,
           idempotency_key: Annotated[Optional[str], typer.Option(
               "--idempotency-key", help="include the vertex-trainer-key label submit would add")] = None) -> None:
    """Print the CustomJob that submit would send (nothing is sent)."""
    from vertex_trainer import render as r

    job_spec = load(spec, set_, var, project, region)
    if format is RenderFormat.spec:
        sys.stdout.write(job_spec.to_yaml())
        return
    if idempotency_key:
        from vertex_trainer.submit import check_idempotency_key

        check_idempotency_key(idempotency_key)
    job = r.custom_job(job_spec, planned_artifact(job_spec), idempotency_key=idempotency_key)
    if format is RenderFormat.json:
        sys.stdout.write(r.to_json(job))
    elif format is RenderFormat.yaml:
        sys.stdout.write(r.to_yaml(job))
    else:
        sys.stdout.write(r.to_gcloud_config(job_spec, job))


@app.command()
def hardware(output: OutputOpt = OutputFormat.text) -> None:
    """List the hardware presets (machine, accelerators, memory, Flex Start, default precision)."""
    from vertex_trainer.hardware import catalog_rows

    rows = catalog_rows()
    if output is OutputFormat.json:
        emit_json(rows)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for col in ("preset", "machine type", "accelerators", "acc. memory", "vCPUs", "flex-start", "precision"):
        table.add_column(col)
    for row in rows:
        acc = f"{row['accelerator_count']} x {row['accelerator_type']}" if row["accelerator_type"] else "-"
        if row["tpu_topology"]:
            acc += f" ({row['tpu_topology']})"
        flex = "yes" if row["flex_start"] else "no"
        if row["spot_or_flex_only"]:
            flex += " (spot/flex only)"
        table.add_row(row["preset"], row["machine_type"], acc,
                      f"{row['accelerator_memory_gb']} GB" if row["accelerator_memory_gb"] else "-",
                      str(row["vcpus"] or "-"), flex, row["default_precision"])
    Console(highlight=False).print(table)


@app.command()
def schema() -> None:
    """Print the JSON Schema of the job spec (for editor completion)."""
    from vertex_trainer.spec import json_schema

    emit_json(json_schema())


# ---- submitter commands (vertex_trainer/submit.py, api.py) --------------------------------------
JobArg = Annotated[str, typer.Argument(help="a job: projects/P/locations/R/customJobs/ID, or an ID with "
                                            "--project/--region", show_default=False)]
KeyOpt = Annotated[Optional[str], typer.Option(
    "--idempotency-key", metavar="KEY",
    help="reuse for retries (CI: the run id): a job already created with KEY is adopted, never "
         "created twice. Lowercase letters, digits, '_' and '-', <= 63 chars. Default: random")]


@app.command()
def submit(spec: SpecPath, set_: SetOpt = None, var: VarOpt = None, project: ProjectOpt = None,
           region: RegionOpt = None,
           dry_run: Annotated[bool, typer.Option("--dry-run", help="print the exact requests; send, "
                                                 "build and run nothing")] = False,
           local: Annotated[bool, typer.Option("--local", help="run the same job on this machine")] = False,
           wait: Annotated[bool, typer.Option("--wait/--no-wait", help="follow the job until it ends; "
                                              "exit 1 unless it SUCCEEDED")] = False,
           output: OutputOpt = OutputFormat.text,
           idempotency_key: KeyOpt = None,
           cancel_on_interrupt: Annotated[bool, typer.Option(
               "--cancel-on-interrupt", help="with --wait: Ctrl-C cancels the job (default: stop "
                                             "waiting, the job keeps running)")] = False) -> None:
    """Create the Vertex AI CustomJob (or run it here with --local)."""
    from vertex_trainer import api
    from vertex_trainer.submit import check_key

    if idempotency_key is not None:
        check_key(idempotency_key)
    job_spec = load(spec, set_, var, project, region)
    say = _stderr_line
    if dry_run or local:
        result = api.submit(job_spec, wait=wait, idempotency_key=idempotency_key, local=local,
                            dry_run=dry_run, log=say, console=None if output is OutputFormat.json
                            else err_console())
        return _show_dry_run(result, output) if dry_run else _show_local(result, output)
    job = api.submit(job_spec, idempotency_key=idempotency_key, log=say)
    if output is OutputFormat.text:
        verb = "adopted" if job.adopted else "created"
        print(f"{verb:8} {job.name}\nstate    {short_state(job.state)}\nconsole  {job.console_url}")
        if job.adopted:
            say(f"a job with idempotency key {job.idempotency_key} already existed: adopted, not re-created")
    if wait:
        _follow(job, output, cancel_on_interrupt)
    elif output is OutputFormat.json:
        emit_json(job.to_dict())


@app.command()
def status(job: JobArg, project: JobProjectOpt = None, region: JobRegionOpt = None,
           wait: Annotated[bool, typer.Option("--wait", help="follow the job until it ends; exit 1 "
                                              "unless it SUCCEEDED")] = False,
           output: OutputOpt = OutputFormat.text) -> None:
    """Show a job's state (and its error, if it failed)."""
    from vertex_trainer import api

    found = api.status(job, **_where(project, region))
    if wait and not found.done:
        return _follow(found, output, cancel_on_interrupt=False, describe=True)
    _show_job(found, output)
    if wait and not found.succeeded:
        raise_failed(found)


@app.command()
def cancel(job: JobArg, project: JobProjectOpt = None, region: JobRegionOpt = None,
           output: OutputOpt = OutputFormat.text) -> None:
    """Cancel a job (a job that already ended is left as it is)."""
    from vertex_trainer import api

    found = api.status(job, **_where(project, region))
    if found.done:
        if output is OutputFormat.text:
            print(f"{found.name} already ended: {short_state(found.state)} (nothing to cancel)")
        else:
            emit_json(found.describe())
        return
    found.cancel()
    if output is OutputFormat.text:
        print(f"cancel requested: {found.name}\nstate    {short_state(found.state)}")
    else:
        emit_json(found.describe())


@app.command("list")
def list_jobs(project: JobProjectOpt = None, region: JobRegionOpt = None,
              label: Annotated[Optional[List[str]], typer.Option(
                  "--label", metavar="KEY=VALUE", help="only jobs with this label (repeatable)",
                  show_default=False)] = None,
              all_jobs: Annotated[bool, typer.Option("--all", help="include jobs not created by "
                                                     "vertex-trainer")] = False,
              limit: Annotated[int, typer.Option("--limit", min=1, help="at most this many, newest "
                                                 "first")] = 20,
              output: OutputOpt = OutputFormat.text) -> None:
    """List jobs, newest first (by default those created by vertex-trainer)."""
    from vertex_trainer import api
    from vertex_trainer.submit import parse_label

    labels = dict(parse_label(item) for item in label or ())
    where = _where(project, region, need=True)
    jobs = api.list_jobs(where["project"], where["region"], labels=labels, all_jobs=all_jobs,
                         limit=limit)
    if output is OutputFormat.json:
        return emit_json({"jobs": [j.describe() for j in jobs]})
    if not jobs:
        print(f"no jobs in {where['project']} / {where['region']}"
              + (f" with {', '.join(f'{k}={v}' for k, v in labels.items())}" if labels else ""))
        return
    rows = [("ID", "DISPLAY NAME", "STATE", "CREATED", "KEY")]
    rows += [(j.id, j.display_name, short_state(j.state), (j.data.get("createTime") or "")[:19].replace("T", " "),
              j.idempotency_key or "-") for j in jobs]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


@dev_app.command("fake-vertex")
def dev_fake_vertex(
    port: Annotated[int, typer.Option("--port", help="port to listen on (0: any free port)")] = 8765,
    host: Annotated[str, typer.Option("--host", help="address to listen on")] = "127.0.0.1",
) -> None:
    """Run a fake Vertex AI JobService (REST) for offline submit/status/cancel/list."""
    from vertex_trainer.emulators.vertex import serve

    serve(host, port)


@dev_app.command("gcs-emulator")
def dev_gcs_emulator(
    port: Annotated[int, typer.Option("--port", help="emulator port (STORAGE_EMULATOR_HOST)")] = 9023,
    proxy_port: Annotated[int, typer.Option("--proxy-port", help="TLS proxy port for TensorFlow's gs://")] = 9024,
    bucket: Annotated[Optional[List[str]], typer.Option(
        "--bucket", help="create this bucket at start (repeatable)", show_default=False)] = None,
) -> None:
    """Run a Cloud Storage emulator on 127.0.0.1 (in memory) and print the variables to export.

    With them exported, `submit --local`, `data synth` and TensorFlow read and write gs:// paths
    in the emulator (TF through a TLS proxy with a throwaway CA). Ctrl-C stops it; data is lost.
    """
    from vertex_trainer.emulators.gcs import serve_forever

    def show(exports: str) -> None:
        print(exports, flush=True)
        _stderr_line("# Cloud Storage emulator running: export the lines above in the shell that "
                     "runs `submit --local` (or redirect them to a file and source it). Ctrl-C stops it.")

    serve_forever(port=port, proxy_port=proxy_port, buckets=tuple(bucket or ()), print_fn=show)


def _stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _where(project: str | None, region: str | None, need: bool = False) -> dict:
    """--project/--region, else $GOOGLE_CLOUD_PROJECT / gcloud's configuration."""
    from vertex_trainer.spec import default_project, default_region

    where = {"project": project or default_project(), "region": region or default_region()}
    if need and not where["project"]:
        raise UserError("no project: pass --project or set $GOOGLE_CLOUD_PROJECT")
    if need and not where["region"]:
        raise UserError("no region: pass --region (e.g. --region us-central1)")
    return where


def _show_job(job, output: OutputFormat) -> None:
    if output is OutputFormat.json:
        return emit_json(job.describe())
    d = job.describe()
    rows = [("name", d["name"]), ("display", d["display_name"]), ("state", short_state(d["state"])),
            ("created", d["create_time"]), ("started", d["start_time"]), ("ended", d["end_time"]),
            ("console", d["console_url"]), ("error", d["error"])]
    print("\n".join(f"{k:8} {v}" for k, v in rows if v))


def raise_failed(job) -> None:
    from vertex_trainer.errors import JobFailed

    raise JobFailed(job.failure_message())


def _follow(job, output: OutputFormat, cancel_on_interrupt: bool, describe: bool = False) -> None:
    """submit/status --wait: show each state change until the job ends; exit per CONTRACT."""
    import time

    console = err_console()

    def line(j) -> None:
        console.print(f"{time.strftime('%H:%M:%S')}  {short_state(j.state)}", markup=False)

    try:
        if console.is_terminal:
            with console.status(f"waiting for {job.id} (Ctrl-C stops waiting)") as spinner:
                def on_state(j) -> None:
                    line(j)
                    spinner.update(f"{job.id} {short_state(j.state)} (Ctrl-C stops waiting)")

                job.wait(on_state=on_state, check=False)
        else:
            job.wait(on_state=line, check=False)
    except KeyboardInterrupt:
        if cancel_on_interrupt:
            job.cancel()
            _stderr_line(f"interrupted: cancel requested, the job is {short_state(job.state)}")
        else:
            _stderr_line(f"stopped waiting; the job keeps running ({short_state(job.state)}).\n"
                         f"  follow it:  vertex-trainer status {job.name} --wait\n"
                         f"  cancel it:  vertex-trainer cancel {job.name}")
        if output is OutputFormat.json:
            emit_json(job.describe() if describe else job.to_dict())
        raise typer.Exit(130)
    if output is OutputFormat.json:
        emit_json(job.describe() if describe else job.to_dict())
    elif describe:
        _show_job(job, output)
    else:
        print(f"final    {short_state(job.state)}")
    if not job.succeeded:
        raise_failed(job)


def _show_dry_run(plan, output: OutputFormat) -> None:
    if output is OutputFormat.json:
        return emit_json(plan.to_dict())
    if plan.local:
        print("# dry run: nothing runs. submit --local would run this CustomJob on this machine:")
        sys.stdout.write(json.dumps(plan.job, indent=2) + "\n")
        return
    lookup, create = plan.requests
    from urllib.parse import urlencode

    print("# dry run: nothing was sent, built or run. submit would:")
    steps = iter(range(1, 4))
    pkg = plan.package
    if pkg:
        how = f"build it with {pkg['builder']}" if pkg["kind"] == "image" else "upload the sdist"
        print(f"# {next(steps)}. package: if {pkg['target']} does not exist yet, {how}")
        print(f"#    (context: {pkg['files']} files, {pkg['bytes']:,} bytes, {pkg['context_hash']})")
    print(f"# {next(steps)}. look for a job already created with idempotency key {plan.idempotency_key}")
    print(f"{lookup['method']} {lookup['url']}?{urlencode(lookup['params'])}")
    print(f"# {next(steps)}. if there is none, create it")
    if plan.image:
        print(f"#    image: {plan.image}")
    print(f"{create['method']} {create['url']}")
    sys.stdout.write(json.dumps(create["body"], indent=2) + "\n")


def _show_local(result, output: OutputFormat) -> None:
    if output is OutputFormat.json:
        emit_json(result.to_dict())
    else:
        d = result.to_dict()
        rows = [("local", d["name"]), ("state", short_state(d["state"] or "")), ("output", d["output_dir"])]
        print("\n".join(f"{k:8} {v}" for k, v in rows if v))  # run_local showed the metrics
    if result.done and not result.succeeded:
        from vertex_trainer.errors import JobFailed

        raise JobFailed(result.failure_message())


# ---- packager command (vertex_trainer/package.py) -------------------------------------------------
@app.command()
def package(spec: SpecPath, set_: SetOpt = None, var: VarOpt = None, project: ProjectOpt = None,
            region: RegionOpt = None,
            builder: Annotated[Optional[str], typer.Option(
                "--builder", metavar="docker|cloud-build",
                help="how to build (default: image.builder, else cloud-build)")] = None,
            dry_run: Annotated[bool, typer.Option(
                "--dry-run", help="print the plan (files, size, hash, tag, builder); touch nothing")] = False,
            output: OutputOpt = OutputFormat.text) -> None:
    """Build and push the training image (once per content hash), or stage the Python package."""
    from vertex_trainer import package as packager

    job_spec = load(spec, set_, var, project, region)
    result = packager.ensure_artifact(job_spec, builder=builder, dry_run=dry_run, log=_stderr_line)
    if output is OutputFormat.json:
        emit_json(result.to_json())
        return
    if dry_run and result.plan is not None:
        print("\n".join(result.plan.describe()))
    print(result.summary())


# ---- data tools (trainer_image/trainer/datagen.py) ----------------------------------------------
@data_app.command("synth")
def data_synth(
    out_dir: Annotated[str, typer.Argument(help="where to write the TFRecords (local path or gs://)")],
    examples: Annotated[int, typer.Option("--examples", min=1, help="training examples")] = 1024,
    shards: Annotated[int, typer.Option("--shards", min=1, help="number of train-*.tfrecord files")] = 8,
    image_size: Annotated[int, typer.Option("--image-size", min=8, max=1024, help="square image size (px)")] = 64,
    num_classes: Annotated[int, typer.Option("--num-classes", min=2, help="number of classes")] = 10,
    eval_examples: Annotated[int, typer.Option("--eval-examples", min=0, help="validation examples "
                                               "(validation-*.tfrecord)")] = 0,
    seed: Annotated[int, typer.Option("--seed", help="random seed")] = 0,
) -> None:
    """Write random JPEG images as sharded TFRecords (ImageNet layout)."""
    from trainer import datagen

    # One call: the eval split must come from the same class distribution as the train split.
    paths = datagen.synthesize(out_dir, examples=examples, shards=shards, image_size=image_size,
                               num_classes=num_classes, seed=seed, prefix="train", eval_examples=eval_examples)
    print(f"wrote {len(paths)} files to {out_dir}")


@data_app.command("convert")
def data_convert(
    image_dir: Annotated[Path, typer.Argument(help="a folder with one sub-folder of images per class")],
    out_dir: Annotated[str, typer.Argument(help="where to write the TFRecords (local path or gs://)")],
    shards: Annotated[Optional[int], typer.Option("--shards", min=1, help="number of shards "
                                                  "(default: ~128 MB each)")] = None,
    prefix: Annotated[str, typer.Option("--prefix", help="file name prefix: train or validation")] = "train",
) -> None:
    """Convert class-per-folder images to sharded TFRecords."""
    if not image_dir.is_dir():
        raise UserError(f"IMAGE_DIR {str(image_dir)!r} is not a directory",
                        hint="give a folder with one sub-folder of images per class")
    from trainer import datagen

    paths = datagen.convert(str(image_dir), out_dir, shards=shards, prefix=prefix)
    print(f"wrote {len(paths)} files to {out_dir}")


# ---- entry point ------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> None:
    """Console-script entry: maps errors to exit codes; tracebacks only with --debug."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = os.environ.get("VERTEX_TRAINER_DEBUG") == "1"
    if "--debug" in args:
        args.remove("--debug")
        debug = True
        os.environ["VERTEX_TRAINER_DEBUG"] = "1"
    try:
        app(args=args, prog_name="vertex-trainer")
    except VertexTrainerError as e:
        if debug:
            raise
        _print_error(e)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)


def _print_error(e: VertexTrainerError) -> None:
    text = f"error: {e.message}"
    if e.hint:
        text += f"\n  hint: {e.hint}"
    print(text, file=sys.stderr)


if __name__ == "__main__":
    main()
