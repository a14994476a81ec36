"""The `vertex-trainer` command line: a thin typer layer over the Python API (vertex_trainer.api).

One small function per command, grouped by module (spec_cmds, jobs, logs, package, deploy, data,
dev, ...; each module has `register(app)`, one line each below); each
loads the spec once through the API and hands the object down. Heavy libraries (tensorflow,
google.cloud.*) are imported only inside the commands that need them.
"""

from __future__ import annotations

import os
import sys

import typer

# One command module per line: adding a command group is a one-line change here.
from vertex_trainer.cli import bench  # noqa: I001
from vertex_trainer.cli import cost
from vertex_trainer.cli import data
from vertex_trainer.cli import deploy
from vertex_trainer.cli import dev
from vertex_trainer.cli import jobs
from vertex_trainer.cli import logs
from vertex_trainer.cli import package
from vertex_trainer.cli import pipeline
from vertex_trainer.cli import resources
from vertex_trainer.cli import shell
from vertex_trainer.cli import spec_cmds
from vertex_trainer.cli import trigger
from vertex_trainer.cli import tuning
from vertex_trainer.errors import VertexTrainerError
from vertex_trainer.settings import DEBUG_ENV

app = typer.Typer(
    name="vertex-trainer",
    help="From a YAML spec to a Vertex AI CustomJob (GPU/TPU, Spot, Flex Start), and the same job on this machine.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
spec_cmds.register(app)
jobs.register(app)
logs.register(app)
package.register(app)
deploy.register(app)
app.add_typer(data.app, name="data")
app.add_typer(dev.app, name="dev")
tuning.register(app)
app.add_typer(pipeline.app, name="pipeline")
app.add_typer(trigger.app, name="trigger")
bench.register(app)
cost.register(app)
resources.register(app)
shell.register(app)
# (new command groups register here, one line each)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry: maps errors to exit codes; tracebacks only with --debug."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = os.environ.get(DEBUG_ENV) == "1"
    if "--debug" in args:
        args.remove("--debug")
        debug = True
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


__all__ = ["app", "main"]
