"""The `vertex-trainer` command line: a thin typer layer over the Python API (vertex_trainer.api).

One small function per command, grouped by module (spec_cmds, jobs, package, data, dev); each
loads the spec once through the API and hands the object down. Heavy libraries (tensorflow,
google.cloud.*) are imported only inside the commands that need them.
"""

from __future__ import annotations

import os
import sys

import typer

from vertex_trainer.cli import data, dev, jobs, package, spec_cmds
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
package.register(app)
app.add_typer(data.app, name="data")
app.add_typer(dev.app, name="dev")


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
