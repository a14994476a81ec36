"""The CLI reference (docs/cli.md), generated from the typer app so it cannot drift:

    python -m vertex_trainer.cli.reference > docs/cli.md      # or: make docs

Each command (and each subcommand of a group) gets its usage line, its help and a table of its
arguments and options, as `--help` shows them. A test fails when docs/cli.md differs from what
this prints.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator
from typing import Any

import typer.main

from vertex_trainer.cli import app

HEADER = """\
# Command reference

Every `vertex-trainer` command with its arguments and options, as `--help` shows them. Generated
from the CLI itself: do not edit by hand, run `make docs` (or `python -m
vertex_trainer.cli.reference > docs/cli.md`). What the commands promise (output formats, exit
codes, idempotency) is in docs/contract.md.
"""


def reference() -> str:
    """The Markdown of docs/cli.md.

    Returns:
        the whole page, one section per command, in the order `vertex-trainer --help` lists them.
    """
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="vertex-trainer")
    parts = [HEADER, _global_options(root, ctx)]
    for path, command, command_ctx in _walk(root, ctx, ["vertex-trainer"]):
        parts.append(_section(path, command, command_ctx))
    return "\n".join(parts)


def _global_options(root: Any, ctx: Any) -> str:
    """The options of `vertex-trainer` itself, which any command takes anywhere on the line."""
    rows = [
        r
        for r in (_row(param, ctx) for param in root.get_params(ctx) if param.name != "help")
        if r is not None
    ]
    lines = [
        "## Global options",
        "",
        "`--debug` and `--impersonate-service-account` go with every command, before or after it "
        "on the line (`vertex-trainer --debug submit SPEC` and `vertex-trainer submit SPEC --debug` "
        "are the same); `--version` comes before any command.",
        "",
        "| option | meaning |",
        "|---|---|",
    ]
    lines += [f"| {_cell(name)} | {_cell(meaning)} |" for name, meaning in rows]
    return "\n".join([*lines, ""])


def _walk(group: Any, ctx: Any, path: list[str]) -> Iterator[tuple[list[str], Any, Any]]:
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        sub_ctx = command.context_class(command, info_name=name, parent=ctx)
        yield [*path, name], command, sub_ctx
        if hasattr(command, "list_commands"):
            yield from _walk(command, sub_ctx, [*path, name])


def _section(path: list[str], command: Any, ctx: Any) -> str:
    level = "#" * min(len(path), 4)
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines = [f"{level} `{' '.join(path[1:])}`", "", "```text", f"{' '.join(path)} {usage}", "```", ""]
    if command.help:
        lines += [_plain(command.help), ""]
    rows = [r for r in (_row(param, ctx) for param in command.get_params(ctx)) if r is not None]
    if rows:
        lines += ["| argument / option | meaning |", "|---|---|"]
        lines += [f"| {_cell(name)} | {_cell(meaning)} |" for name, meaning in rows]
        lines.append("")
    return "\n".join(lines)


def _row(param: Any, ctx: Any) -> tuple[str, str] | None:
    if getattr(param, "hidden", False):
        return None
    record = param.get_help_record(ctx)
    if record is None:  # an argument without help
        return f"`{param.name}`", ""
    flags, meaning = record
    return f"`{flags}`", meaning


def _plain(text: str) -> str:
    """A command's help as Markdown paragraphs (click's \\b no-rewrap markers dropped)."""
    return inspect.cleandoc(text).replace("\b\n", "")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def main() -> None:
    """Print the reference (`python -m vertex_trainer.cli.reference > docs/cli.md`).

    Returns:
        None; the page goes to stdout.
    """
    sys.stdout.write(reference())


if __name__ == "__main__":
    main()
