"""The `vertex-trainer` command line: a thin typer layer over the Python API (vertex_trainer.api).

One small function per command, grouped by module (spec_cmds, jobs, logs, package, deploy, data,
dev, ...); each module has `register(app)` (or a typer `app` for a group of subcommands), and is
named once in COMMANDS below with the commands it defines. A module is imported only when one of
its commands runs: `vertex-trainer validate` loads spec_cmds and nothing else, and `--help` reads
each command's one-line help without building the others' options (benchmarks/RESULTS-cli.md).
Heavy libraries (tensorflow, google.cloud.*) are imported only inside the commands that need them.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.core

if TYPE_CHECKING:
    from typer._click import Command

from vertex_trainer.errors import VertexTrainerError
from vertex_trainer.redact import terminal_safe
from vertex_trainer.settings import DEBUG_ENV

# One command module per line, with the commands it registers (in the order --help lists them):
# adding a command or a group is a one-line change here.
COMMANDS: dict[str, tuple[str, ...]] = {
    "spec_cmds": ("validate", "render", "hardware", "schema"),
    "check": ("check", "setup"),
    "jobs": ("submit", "status", "cancel", "list"),
    "logs": ("logs",),
    "report": ("report",),
    "profile": ("profile", "tensorboard"),
    "package": ("package",),
    "deploy": ("deploy", "serve"),
    "endpoints": ("endpoints", "undeploy"),
    "data": ("data",),
    "dev": ("dev",),
    "tuning": ("trials",),
    "pipeline": ("pipeline",),
    "trigger": ("trigger",),
    "bench": ("bench",),
    "cost": ("cost",),
    "resources": ("resources",),
    "shell": ("shell",),
}
_MODULE_OF = {command: module for module, commands in COMMANDS.items() for command in commands}
# The commands that answer in a blink (they read a spec and send nothing): they run start to end
# without the cyclic garbage collector, which otherwise makes ~70 passes over the objects the
# imports and pydantic's model building create, and the process skips the collector's last pass
# over everything at exit (together about 6% of `validate`'s instructions; nothing they make
# lives long). Every other command gets the collector back as soon as it is looked up.
QUICK = frozenset({"spec_cmds"})
_GC_PAUSED: list[bool] = []  # [True] while gc_paused() holds the collector off
HELP = (
    "From a YAML spec to a Vertex AI CustomJob (GPU/TPU, Spot, Flex Start), and the same job on this machine."
)
DISTRIBUTION = "vertex-trainer"
VERSION_FLAGS = ("--version", "-V")
DEBUG_FLAG = "--debug"
IMPERSONATE_FLAG = "--impersonate-service-account"
# The global options: main() takes them off the command line wherever they stand, before typer
# sees it; the root callback declares them only so that `--help` lists them, and every command's
# help ends with this line.
GLOBAL_EPILOG = (
    f"Global options, anywhere on the line: {DEBUG_FLAG} (the error's traceback too, the same exit "
    f"code) and {IMPERSONATE_FLAG} SA (every request as SA); the top-level --help describes them."
)


def command_module(module: str) -> typer.Typer:
    """A typer app holding the commands of `vertex_trainer.cli.<module>`, as registered there
    (its `register(app)`, or its `app` as the group of the same name)."""
    loaded = importlib.import_module(f"vertex_trainer.cli.{module}")
    holder = typer.Typer()
    if hasattr(loaded, "register"):
        loaded.register(holder)
    else:
        holder.add_typer(loaded.app, name=module)
    return holder


def _infos(module: str) -> dict[str, Any]:
    """name -> the CommandInfo or TyperInfo (a group) of each command `module` registers."""
    holder = command_module(module)
    found: dict[str, Any] = {}
    for info in holder.registered_commands:
        callback = info.callback
        found[info.name or typer.main.get_command_name(callback.__name__ if callback else "")] = info
    for group in holder.registered_groups:
        found[group.name or ""] = group
    return found


class LazyGroup(typer.core.TyperGroup):
    """The top-level group: a command's module is imported, and its click command built, only
    when that command is looked up (click's lazy-loading pattern, on typer's group)."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(_MODULE_OF)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        module = _MODULE_OF.get(cmd_name)
        if module is None:
            return None
        if module not in QUICK:
            _resume_gc()
        elif _GC_PAUSED:  # at exit: no pass over what the process leaves behind (once)
            atexit.unregister(gc.freeze)
            atexit.register(gc.freeze)
        info = _infos(module)[cmd_name]
        command: Command
        if isinstance(info, typer.models.TyperInfo):
            command = typer.main.get_group_from_info(
                info, pretty_exceptions_short=True, suggest_commands=True, rich_markup_mode=None
            )
        else:
            command = typer.main.get_command_from_info(
                info, pretty_exceptions_short=True, rich_markup_mode=None
            )
        _with_epilog(command)
        self.commands[cmd_name] = command
        return command

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The command list of --help from each command's docstring, without building the
        commands' options (what makes --help cost the sum of every command)."""
        rows = []
        limit = formatter.width - 6 - max(map(len, _MODULE_OF))
        for module in COMMANDS:
            for name, info in _infos(module).items():
                if info.hidden:
                    continue
                rows.append((name, _short_help(name, info, limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """As click's, with typer's "did you mean" over every command (not only those loaded)."""
        from difflib import get_close_matches

        from typer._click.exceptions import UsageError

        try:
            found = self._click_resolve_command(ctx, args)
        except UsageError as e:
            matches = get_close_matches(args[0], self.list_commands(ctx)) if args else []
            if matches:
                e.message = f"{e.message.rstrip('.')}. Did you mean {', '.join(map(repr, matches))}?"
            raise
        self.json_failures = asks_json(found[1], found[2])
        return found

    json_failures = False  # the command's line asks for --output json (resolve_command)

    def invoke(self, ctx: Any) -> Any:
        """As TyperGroup's; a command asked for `--output json` that fails in any way (bad input,
        a service, a job, Ctrl-C, a defect) writes its one `{"error": ...}` object on stdout
        first, unless it wrote its own object already (a job that ended FAILED). The error goes
        on as before: its text on stderr, its exit code."""
        from vertex_trainer.cli import common

        common.EMITTED.clear()
        try:
            return super().invoke(ctx)
        except BaseException as e:
            if self.json_failures:
                failure = failure_object(e)
                if failure is not None:
                    common.emit_failure(failure)
            raise


def _with_epilog(command: Any) -> None:
    """End the help of `command` (and of each subcommand of a group) with GLOBAL_EPILOG: the
    global options are no command's own, so no command's option list shows them."""
    if not command.epilog:
        command.epilog = GLOBAL_EPILOG
    for sub in (getattr(command, "commands", None) or {}).values():
        _with_epilog(sub)


def _short_help(name: str, info: Any, limit: int) -> str:
    """The one-line help click would show for the command or group `info`."""
    import inspect

    text: str | None
    if isinstance(info, typer.models.TyperInfo):
        text = typer.main.solve_typer_info_help(info)
        short = None
    else:
        text = inspect.cleandoc(info.help) if info.help else inspect.getdoc(info.callback)
        short = info.short_help
    return typer.core.TyperCommand(name, help=text, short_help=short).get_short_help_str(limit)


app = typer.Typer(
    name="vertex-trainer",
    cls=LazyGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: formatting it with rich costs more than the rest of --help
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    if value:
        print(version_line())
        raise typer.Exit(0)


@app.callback(help=HELP)
def _root(
    version: Annotated[
        bool,
        typer.Option(
            *VERSION_FLAGS,
            help="print vertex-trainer's version and exit",
            is_eager=True,
            callback=_show_version,
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            DEBUG_FLAG,
            help="on an error, print its traceback too; the exit code stays the error's (2, 3 or 1). "
            "Any command, anywhere on the line; also VERTEX_TRAINER_DEBUG=1",
        ),
    ] = False,
    impersonate_service_account: Annotated[
        str | None,
        typer.Option(
            IMPERSONATE_FLAG,
            metavar="SA",
            help="send every request as this service account (NAME@PROJECT.iam.gserviceaccount.com; "
            "you need roles/iam.serviceAccountTokenCreator on it; docs/check.md). Any command, "
            "anywhere on the line; also VERTEX_TRAINER_IMPERSONATE_SERVICE_ACCOUNT",
        ),
    ] = None,
) -> None:
    """The group itself does nothing: each command is its own function. (main() takes the global
    options off the command line before typer parses it; they are declared here for --help.)"""


def main(argv: list[str] | None = None) -> None:
    """Console-script entry: maps errors to exit codes; tracebacks only with --debug.

    Args:
        argv: the arguments (default: sys.argv[1:]).

    Returns:
        None; exits with the command's code (docs/contract.md section 2).
    """
    with gc_paused():
        _main(argv)


def _main(argv: list[str] | None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = os.environ.get(DEBUG_ENV) == "1"
    while DEBUG_FLAG in args:
        args.remove(DEBUG_FLAG)
        debug = True
    from vertex_trainer.cli import common
    from vertex_trainer.cli.common import IMPERSONATE, no_pydantic_plugins

    common.EMITTED.clear()  # this invocation's: `app` run in this process before (CliRunner) left it
    try:
        try:
            IMPERSONATE[:] = _impersonation(args)
        except VertexTrainerError as e:  # before any command is looked up: its line as written
            if _line_asks_json(args):
                common.emit_failure(failure_object(e) or {})
            raise
        if args[:1] and args[0] in VERSION_FLAGS:  # before any command is looked up
            print(version_line())
            return
        with no_pydantic_plugins():
            app(args=args, prog_name="vertex-trainer")
    except VertexTrainerError as e:
        if debug:  # the traceback, then the same message and exit code as without --debug
            import traceback

            traceback.print_exc(file=sys.stderr)
        _print_error(e)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    finally:
        IMPERSONATE.clear()
        common.EMITTED.clear()


def version_line() -> str:
    """`vertex-trainer <version>`, from the installed distribution's metadata; a source checkout
    that was never installed has none, and says where it runs from (with its pyproject.toml's
    version when it has one)."""
    from importlib import metadata

    try:
        return f"{DISTRIBUTION} {metadata.version(DISTRIBUTION)}"
    except metadata.PackageNotFoundError:
        pass
    from pathlib import Path

    checkout = Path(__file__).resolve().parents[2]
    declared = _declared_version(checkout / "pyproject.toml")
    return (
        f"{DISTRIBUTION} {declared or 'unknown'} (not installed: no package metadata; running from "
        f"the source checkout {checkout}; `pip install .` there installs it)"
    )


def _declared_version(pyproject: Any) -> str | None:
    """The version a checkout's pyproject.toml declares for this distribution, or None (its
    [project] table's name and version lines: tomllib is Python 3.11's, and 3.10 is supported)."""
    import re

    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return None
    table = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    fields = dict(re.findall(r'^(name|version)\s*=\s*"([^"]*)"', table[1], re.M)) if table else {}
    return fields.get("version") if fields.get("name") == DISTRIBUTION else None


def _impersonation(args: list[str]) -> list[str]:
    """Take `--impersonate-service-account SA` (or `=SA`) off `args`, wherever it stands (every
    command that sends takes it, as --debug); returns [SA] or []. Exit 2 without a value."""
    found: list[str] = []
    for i, arg in enumerate(list(args)):
        if arg == IMPERSONATE_FLAG or arg.startswith(IMPERSONATE_FLAG + "="):
            value = arg.partition("=")[2] if "=" in arg else (args[i + 1] if i + 1 < len(args) else "")
            if not value or value.startswith("-"):
                from vertex_trainer.errors import UserError

                raise UserError(
                    f"{IMPERSONATE_FLAG} needs a service account (NAME@PROJECT.iam.gserviceaccount.com)"
                )
            del args[i : i + (1 if "=" in arg else 2)]
            found = [value]
            break
    return found


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the command line with the cyclic garbage collector off until a command outside QUICK
    is looked up (then it is back on); on at the end either way. A no-op when it was off already.

    Yields:
        None.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    _GC_PAUSED.append(True)
    try:
        yield
    finally:
        _resume_gc()


def _resume_gc() -> None:
    """Turn the cyclic garbage collector back on if gc_paused() turned it off (else a no-op)."""
    if _GC_PAUSED:
        _GC_PAUSED.clear()
        gc.enable()


def _print_error(e: VertexTrainerError) -> None:
    message, hint = _shown(e)
    print(f"error: {message}" + (f"\n  hint: {hint}" if hint else ""), file=sys.stderr)


def _shown(e: VertexTrainerError) -> tuple[str, str | None]:
    """An error's message and hint as the text on stderr and the JSON on stdout both show them:
    a message can carry a service's words or a job's error, so its control characters are shown
    (redact.terminal_safe), never sent to the terminal (or to `jq -r`'s)."""
    return terminal_safe(e.message), terminal_safe(e.hint) if e.hint else None


# -- --output json on failure (docs/contract.md section 2) ---------------------------------------


def asks_json(command: Any, args: list[str]) -> bool:
    """Whether `args`, a command's line after its name, ask for `--output json`, read with the
    command's own options as click reads them: its `output` option (with `-o` where it has it: -o
    is --out elsewhere), the last one given; another option's value is skipped (`--set -o` is
    not it). A group's subcommand is looked up first (`pipeline submit ...`)."""
    while args and isinstance(getattr(command, "commands", None), dict):
        sub = command.commands.get(args[0])
        if sub is None:
            return False
        command, args = sub, args[1:]
    options = [p for p in getattr(command, "params", ()) if p.param_type_name == "option"]
    output = next((p for p in options if p.name == "output"), None)
    if output is None:
        return False
    valued = {o for p in options if not (p.is_flag or p.count) for o in p.opts}
    chosen = None
    words = iter(args)
    for word in words:
        if word == "--":
            break
        name, eq, value = word.partition("=")
        if word.startswith("--") and eq:
            chosen = value if name in output.opts else chosen
        elif word in output.opts:
            chosen = next(words, None)
        elif word in valued:
            next(words, None)
        elif not word.startswith("--") and len(word) > 2 and word[:2] in output.opts:
            chosen = word[2:]  # -ojson
    return chosen == "json"


def _line_asks_json(args: list[str]) -> bool:
    """Whether a whole command line (the global options still on it) asks for `--output json`,
    its command looked up and its words read as asks_json reads them (`-o json`, `-ojson`; not
    after `--` nor as another option's value)."""
    rest = [a for a in args if a != IMPERSONATE_FLAG and not a.startswith(IMPERSONATE_FLAG + "=")]
    group: Any = typer.main.get_command(app)  # the LazyGroup: a command's module loaded on lookup
    command = group.get_command(None, rest[0]) if rest else None
    return command is not None and asks_json(command, rest[1:])


def failure_object(error: BaseException) -> dict[str, Any] | None:
    """The object a failure writes on stdout under --output json: `{"error": {"exit_code",
    "kind", "message", "hint", "field"}}` (a spec's several problems add "problems", a denial its
    "api" or "permission"); the message and hint as the text on stderr shows them. None for an
    exit that is no failure (code 0)."""
    hint = field = None
    more: dict[str, Any] = {}
    if isinstance(error, VertexTrainerError):
        code, kind = error.exit_code, _kind(error)
        message, hint = _shown(error)
        field = getattr(error, "field", None) or None
        problems = getattr(error, "problems", ())
        if len(problems) > 1:
            more["problems"] = [
                {"field": p.field or None, **dict(zip(("message", "hint"), _shown(p), strict=True))}
                for p in problems
            ]
        more.update({k: v for k in ("api", "permission", "job") if (v := getattr(error, k, None))})
    elif isinstance(error, typer.TyperException):  # click's: the command line itself, exit 2
        code, kind, message = error.exit_code, "usage", terminal_safe(error.format_message())
        field = _option_of(error)
    elif isinstance(error, KeyboardInterrupt):  # Ctrl-C (typer makes it exit 130)
        code, kind, message = 130, "interrupted", terminal_safe(str(error) or "interrupted")
    elif isinstance(error, typer.Exit | SystemExit):  # a command that said why on stderr itself
        status = error.exit_code if isinstance(error, typer.Exit) else error.code
        code = status if isinstance(status, int) else 1 if status else 0
        if code == 0:
            return None
        kind = "interrupted" if code == 130 else "failed"
        message = "interrupted" if code == 130 else f"exit code {code}: the reason is on stderr"
    else:  # a defect: Python prints its traceback on stderr, exit 1
        code, kind = 1, "internal"
        message = terminal_safe(f"{type(error).__name__}: {error}")
        hint = "a defect of vertex-trainer, not of your input: its traceback is on stderr"
    body = {"exit_code": code, "kind": kind, "message": message, "hint": hint, "field": field}
    return {"error": {**body, **more}}


def _kind(error: VertexTrainerError) -> str:
    """What failed, beyond the exit code: invalid (2: input), denied (2: the project's setup, a
    403), service (3), job_failed (1), failed (1: anything else)."""
    from vertex_trainer.errors import JobFailed, ServiceError

    if isinstance(error, JobFailed):
        return "job_failed"
    if error.exit_code == 2:
        return "denied" if isinstance(error, ServiceError) else "invalid"
    return {3: "service"}.get(error.exit_code, "failed")


def _option_of(error: Exception) -> str | None:
    """The option or argument a click usage error names (`--steps`, `spec`), else None."""
    param = getattr(error, "param", None)
    if param is not None and param.param_type_name == "option" and param.opts:
        return str(param.opts[0])
    if param is not None and param.name:
        return str(param.name)  # an argument: as its usage error names it
    name = getattr(error, "option_name", None)
    return str(name) if name else None


__all__ = [
    "COMMANDS",
    "QUICK",
    "app",
    "asks_json",
    "failure_object",
    "gc_paused",
    "main",
    "version_line",
]
