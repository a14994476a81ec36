"""data synth / data convert: TFRecords in the layout the trainer reads.

`synth` writes random images (trainer/datagen.py); `convert` runs the Beam pipeline of
vertex_trainer.dataprep on this machine or on Dataflow.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from vertex_trainer import api
from vertex_trainer.cli import common
from vertex_trainer.cli.common import OutputFormat, OutputOpt

app = typer.Typer(help="Make TFRecord datasets in the layout the trainer reads.", no_args_is_help=True)


@app.command("synth")
def data_synth(
    out_dir: Annotated[str, typer.Argument(help="where to write the TFRecords (local path or gs://)")],
    examples: Annotated[int, typer.Option("--examples", min=1, help="training examples")] = 1024,
    shards: Annotated[int, typer.Option("--shards", min=1, help="number of train-*.tfrecord files")] = 8,
    image_size: Annotated[
        int, typer.Option("--image-size", min=8, max=1024, help="square image size (px)")
    ] = 64,
    num_classes: Annotated[int, typer.Option("--num-classes", min=2, help="number of classes")] = 10,
    eval_examples: Annotated[
        int, typer.Option("--eval-examples", min=0, help="validation examples (validation-*.tfrecord)")
    ] = 0,
    seed: Annotated[int, typer.Option("--seed", help="random seed")] = 0,
) -> None:
    """Write random JPEG images as sharded TFRecords (ImageNet layout)."""
    paths = api.synthesize_data(
        out_dir,
        examples=examples,
        shards=shards,
        image_size=image_size,
        num_classes=num_classes,
        eval_examples=eval_examples,
        seed=seed,
        settings=common.settings(),
    )
    print(f"wrote {len(paths)} files to {out_dir}")


class RunnerName(str, Enum):
    direct = "direct"
    dataflow = "dataflow"


@app.command("convert")
def data_convert(
    image_dir: Annotated[str, typer.Argument(help="one sub-folder of images per class (local or gs://)")],
    out_dir: Annotated[str, typer.Argument(help="where to write the TFRecords (local path or gs://)")],
    shards: Annotated[
        int | None, typer.Option("--shards", help="train shards (default: ~128 MB each)", show_default=False)
    ] = None,
    eval_fraction: Annotated[
        float, typer.Option("--eval-fraction", help="share of each class held out as validation-* (seeded)")
    ] = 0.0,
    eval_dir: Annotated[
        str | None,
        typer.Option(
            "--eval-dir",
            help="a second class-per-folder tree for validation-* (same folder names)",
            show_default=False,
        ),
    ] = None,
    eval_shards: Annotated[
        int | None,
        typer.Option("--eval-shards", help="validation shards (default: ~128 MB each)", show_default=False),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="shuffle (and split) seed: same seed, same shards")] = 0,
    max_side: Annotated[
        int | None,
        typer.Option(
            "--max-side",
            help="resize larger images to this many pixels on their longer side (re-encoded as JPEG)",
            show_default=False,
        ),
    ] = None,
    jpeg_quality: Annotated[
        int, typer.Option("--jpeg-quality", help="JPEG quality of re-encoded images")
    ] = 90,
    marker: Annotated[
        str,
        typer.Option(
            "--marker", help="object written last, when the dataset is complete (what the trigger waits for)"
        ),
    ] = "_SUCCESS",
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite", help="replace a dataset already in OUT_DIR (its marker is removed first)"
        ),
    ] = False,
    runner: Annotated[
        RunnerName, typer.Option("--runner", help="direct: this machine; dataflow: Google Cloud Dataflow")
    ] = RunnerName.direct,
    workers: Annotated[int, typer.Option("--workers", help="direct runner: worker processes")] = 1,
    project: Annotated[
        str | None,
        typer.Option(
            "--project",
            help="dataflow: project (default: $GOOGLE_CLOUD_PROJECT, gcloud's)",
            show_default=False,
        ),
    ] = None,
    region: Annotated[
        str | None,
        typer.Option("--region", help="dataflow: region, best the image bucket's", show_default=False),
    ] = None,
    temp_location: Annotated[
        str | None,
        typer.Option(
            "--temp-location",
            help="dataflow: gs:// for staging and temp files (default: gs://<OUT_DIR bucket>/tmp/dataflow)",
            show_default=False,
        ),
    ] = None,
    max_workers: Annotated[
        int | None, typer.Option("--max-workers", help="dataflow: autoscaling cap", show_default=False)
    ] = None,
    machine_type: Annotated[
        str | None,
        typer.Option(
            "--machine-type", help="dataflow: worker machine type (e.g. n2-standard-4)", show_default=False
        ),
    ] = None,
    job_name: Annotated[
        str | None,
        typer.Option(
            "--job-name",
            help="dataflow: job name (default: vertex-trainer-data-<UTC time>)",
            show_default=False,
        ),
    ] = None,
    beam_option: Annotated[
        list[str] | None,
        typer.Option(
            "--beam-option",
            metavar="--KEY=VALUE",
            help="any other Beam/Dataflow pipeline option, verbatim "
            "(repeatable), e.g. --beam-option=--subnetwork=regions/R/subnetworks/S",
            show_default=False,
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option("--wait/--no-wait", help="dataflow: follow the job to its end and print the summary"),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="print the pipeline options; list, write and send nothing")
    ] = False,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Convert class-per-folder images to sharded TFRecords with Apache Beam.

    Label = index of the class folder among the sorted names (labels.txt). Bad files are listed
    in rejected.txt, never fatal. The end writes manifest.json and, last, the marker.
    """
    # the converter's launcher and storage client (dataprep, gcp.storage: ~70 modules): convert's alone
    from vertex_trainer.api.data import Conversion, Runner
    from vertex_trainer.dataprep.conversion_text import dry_run_text, summary_text

    cfg = common.settings()
    conv = Conversion(
        image_dir=image_dir,
        out_dir=out_dir,
        shards=shards,
        eval_shards=eval_shards,
        eval_fraction=eval_fraction,
        eval_dir=eval_dir,
        seed=seed,
        max_side=max_side,
        jpeg_quality=jpeg_quality,
        marker=marker,
        overwrite=overwrite,
    )
    run_on = Runner(
        name=runner.value,
        project=project or cfg.project,
        region=region or cfg.region,
        temp_location=temp_location,
        max_workers=max_workers,
        machine_type=machine_type,
        job_name=job_name,
        wait=wait,
        direct_workers=workers,
        options=tuple(beam_option or ()),
    )
    if dry_run:
        print(dry_run_text(conv, run_on))
        return
    result = api.convert_data(conv, run_on, settings=cfg, log=common.stderr_line)
    if output == OutputFormat.json:
        common.emit_json(
            {
                "runner": result.runner,
                "seconds": round(result.seconds, 3),
                "job_name": result.job_name,
                "job_id": result.job_id,
                "console_url": result.console_url,
                "counters": result.counters,
                "manifest": result.manifest,
            }
        )
        return
    if result.job_id:
        print(f"Dataflow job {result.job_name} ({result.job_id})\n  {result.console_url}")
        if not result.manifest:
            print(f"{out_dir.rstrip('/')}/{marker} appears when the dataset is complete")
    if result.manifest:
        print(summary_text(result.manifest, result.seconds))
