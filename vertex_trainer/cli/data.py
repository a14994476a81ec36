"""data synth / data convert: TFRecords in the layout the trainer reads (trainer/datagen.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from typing_extensions import Annotated

from vertex_trainer.errors import UserError

app = typer.Typer(help="Make TFRecord datasets in the layout the trainer reads.", no_args_is_help=True)


@app.command("synth")
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


@app.command("convert")
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
