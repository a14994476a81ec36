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
@app.command()
def submit(spec: SpecPath, set_: SetOpt = None, var: VarOpt = None, project: ProjectOpt = None,
           region: RegionOpt = None) -> None:
    """Create the Vertex AI CustomJob (or run it here with --local)."""
    raise UserError("submit is not available yet")


@app.command()
def status(job: Annotated[str, typer.Argument(help="a job resource name or id")]) -> None:
    """Show a job's state."""
    raise UserError("status is not available yet")


@app.command()
def cancel(job: Annotated[str, typer.Argument(help="a job resource name or id")]) -> None:
    """Cancel a job."""
    raise UserError("cancel is not available yet")


@app.command("list")
def list_jobs() -> None:
    """List the jobs created by vertex-trainer."""
    raise UserError("list is not available yet")


# ---- packager command (vertex_trainer/package.py) -------------------------------------------------
@app.command()
def package(spec: SpecPath, set_: SetOpt = None, var: VarOpt = None, project: ProjectOpt = None,
            region: RegionOpt = None) -> None:
    """Build and push the training image (once per content hash)."""
    raise UserError("package is not available yet")


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

    paths = datagen.synthesize(out_dir, examples=examples, shards=shards, image_size=image_size,
                               num_classes=num_classes, seed=seed, prefix="train")
    if eval_examples:
        paths += datagen.synthesize(out_dir, examples=eval_examples, shards=max(1, min(shards, eval_examples)),
                                    image_size=image_size, num_classes=num_classes, seed=seed + 1,
                                    prefix="validation")
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
