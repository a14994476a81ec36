"""The CLI's shared options (issue 44 item 4): a command takes an option group (cli/common.py's
SpecOptions, JobPlace, trigger's FunctionOptions) as one parameter; typer sees the group's own
options where that parameter stands, and the command gets the group built from what was passed.
`--help`, which lists every command, works out no command's options."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from typer.testing import CliRunner

from vertex_trainer.cli.common import SpecOptions, SpecPath, with_option_groups

ROOT = Path(__file__).resolve().parents[2]
SEEN: list[tuple] = []


@dataclass(frozen=True)
class Window:
    """A group with a required option, as trigger's --bucket would be."""

    size: Annotated[int, typer.Option("--size", help="how many")]
    unit: Annotated[str, typer.Option("--unit", help="of what")] = "h"


@with_option_groups
def command(
    spec: SpecPath,
    first: Annotated[bool, typer.Option("--first", help="an option before the groups")] = False,
    *,
    opts: SpecOptions,
    window: Window,
    last: Annotated[str, typer.Option("--last", help="an option after them")] = "z",
) -> None:
    """A command with two groups between its own options."""
    SEEN.append((spec, first, opts, window, last))


def _run(*args: str):
    app = typer.Typer(rich_markup_mode=None, add_completion=False)
    app.command()(command)
    SEEN.clear()
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_the_command_gets_each_group_built_from_its_options():
    done = _run("job.yaml", "--set", "a=1", "--size", "3", "--set", "b=2", "--region", "r1", "--last", "y")
    assert done.exit_code == 0, done.output
    assert SEEN == [
        (
            Path("job.yaml"),
            False,
            SpecOptions(set_=["a=1", "b=2"], var=None, project=None, region="r1"),
            Window(size=3, unit="h"),
            "y",
        )
    ]


def test_help_lists_a_groups_options_in_its_place_with_their_own_help():
    done = _run("--help")
    assert done.exit_code == 0, done.output
    options = done.output.split("Options:")[1].splitlines()
    flags = [line.split()[0] for line in options if line.startswith("  -")]  # (not a wrapped help line)
    assert flags[:8] == ["--first", "--set", "--var", "--project", "--region", "--size", "--unit", "--last"]
    text = " ".join(done.output.split())  # (the help column wraps)
    assert "--set KEY=VALUE override a spec field, e.g. --set trainer.batch_size=4096" in text
    assert "--project <str> Google Cloud project (wins over the spec)" in text
    assert "--size <int> how many [required]" in text


def test_a_required_option_of_a_group_is_required_and_named():
    done = _run("job.yaml", "--unit", "d")
    assert done.exit_code == 2 and SEEN == []
    assert "Missing option '--size'" in done.output


PROBE = """
import json, sys
from vertex_trainer.cli import COMMANDS, _infos, main
from vertex_trainer.cli.common import _Spread

def spread():
    found = {}
    for module in COMMANDS:
        for name, info in _infos(module).items():
            group = getattr(info, "typer_instance", None)
            commands = group.registered_commands if group is not None else [info]
            for callback in (c.callback for c in commands):
                if isinstance(callback, _Spread):
                    found[f"{name}.{callback.__name__}"] = "_spread" in vars(callback)
    return found

for args in (["--help"], ["validate", "--help"]):
    try:
        main(args)
    except SystemExit:
        pass
    print(json.dumps(spread()), file=sys.stderr)
"""


def test_help_works_out_no_commands_options_and_a_command_its_own():
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    after_help, after_validate = (json.loads(line) for line in proc.stderr.strip().splitlines()[-2:])
    assert {"validate.validate", "trigger.render", "status.status"} <= set(after_help)
    assert not any(after_help.values()), after_help
    assert {name for name, done in after_validate.items() if done} == {"validate.validate"}
