"""What every command shares: options, loading the spec the one way, output helpers, settings.

A command module names its own options and takes the shared ones from here: an alias
(`output: OutputOpt`), or a group of them as one parameter (`opts: SpecOptions` is
--set/--var/--project/--region, `place: JobPlace` a job's --project/--region) under
@common.with_option_groups. It calls its helpers as `common.settings()`, `common.emit_json(...)`.

The CLI is the edge: the environment is read here (`settings()`), once per command, and handed
to the API; nothing below reads it again.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import os
import sys
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vertex_trainer import api
from vertex_trainer.contract import short_state
from vertex_trainer.errors import UserError
from vertex_trainer.settings import Settings

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

SpecPath = Annotated[Path, typer.Argument(help="the job spec (YAML)", show_default=False)]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="override a spec field, e.g. --set trainer.batch_size=4096",
        show_default=False,
    ),
]
VarOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--var", metavar="KEY=VALUE", help="a template variable for {{ KEY }} in the spec", show_default=False
    ),
]
ProjectOpt = Annotated[
    str | None, typer.Option("--project", help="Google Cloud project (wins over the spec)")
]
RegionOpt = Annotated[str | None, typer.Option("--region", help="Vertex AI region (wins over the spec)")]
# For commands that take a job, not a spec.
JobProjectOpt = Annotated[
    str | None,
    typer.Option("--project", help="Google Cloud project (default: $GOOGLE_CLOUD_PROJECT, then gcloud's)"),
]
JobRegionOpt = Annotated[
    str | None,
    typer.Option(
        "--region", help="Vertex AI region (default: gcloud's ai/region; not needed with a full job name)"
    ),
]


class OutputFormat(str, Enum):
    text = "text"
    json = "json"


OutputOpt = Annotated[OutputFormat, typer.Option("--output", "-o", help="text for people, json for scripts")]


# -- option groups -------------------------------------------------------------------------------
# Options that commands take together are a group: a frozen dataclass whose fields are the
# options (the aliases above, with their defaults). A command takes the group as one parameter;
# @with_option_groups spreads it into the group's options where the parameter stands (so --help
# lists them in that place, under their own names) and calls the command with the group built
# from what was passed.


@dataclasses.dataclass(frozen=True)
class SpecOptions:
    """--set/--var/--project/--region: what a command that reads a spec changes in it."""

    set_: SetOpt = None
    var: VarOpt = None
    project: ProjectOpt = None
    region: RegionOpt = None

    def load(self, spec: Path, cfg: Settings) -> Any:
        """The spec loaded the way every command loads it (file < --set < --project/--region)."""
        return load(spec, self.set_, self.var, self.project, self.region, cfg)


@dataclasses.dataclass(frozen=True)
class JobPlace:
    """--project/--region of a command that takes a job (or another resource), not a spec."""

    project: JobProjectOpt = None
    region: JobRegionOpt = None

    def where(self, cfg: Settings, need: bool = False) -> dict:
        """The project and region: these options, else the defaults (see `where`)."""
        return where(cfg, self.project, self.region, need=need)


def with_option_groups(command: Callable[..., Any]) -> Callable[..., Any]:
    """`command` as typer reads it: each parameter whose type is an option group (a dataclass)
    replaced by the group's fields, in its place; called, it gets the group built from them."""
    return _Spread(command)


class _Spread:
    """A command with its option groups spread (with_option_groups). The signature is worked out
    when typer first reads it, as it builds the command: `--help`, which lists every command from
    its docstring, pays nothing for it."""

    def __init__(self, command: Callable[..., Any]) -> None:
        # (not __annotations__: typer reads the spread ones, below)
        functools.update_wrapper(
            self, command, assigned=("__module__", "__name__", "__qualname__", "__doc__")
        )
        self._command = command

    def __call__(self, **given: Any) -> Any:
        for name, (group, fields) in self._groups.items():
            given[name] = group(**{field: given.pop(field) for field in fields})
        return self._command(**given)

    @property
    def __signature__(self) -> inspect.Signature:
        return self._spread[0]

    @property
    def __annotations__(self) -> dict[str, Any]:  # type: ignore[override]
        return {p.name: p.annotation for p in self.__signature__.parameters.values()}

    @property
    def _groups(self) -> dict[str, tuple[type, tuple[str, ...]]]:
        return self._spread[1]

    @functools.cached_property
    def _spread(self) -> tuple[inspect.Signature, dict[str, tuple[type, tuple[str, ...]]]]:
        signature = inspect.signature(self._command, eval_str=True)
        params: list[inspect.Parameter] = []
        groups: dict[str, tuple[type, tuple[str, ...]]] = {}
        for param in signature.parameters.values():
            group = param.annotation
            if not (isinstance(group, type) and dataclasses.is_dataclass(group)):
                params.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY))
                continue
            hints = typing.get_type_hints(group, include_extras=True)
            fields = dataclasses.fields(group)
            groups[param.name] = (group, tuple(f.name for f in fields))
            params += [
                inspect.Parameter(
                    f.name,
                    inspect.Parameter.KEYWORD_ONLY,
                    annotation=hints[f.name],
                    default=inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default,
                )
                for f in fields
            ]
        return signature.replace(parameters=params), groups


def settings() -> Settings:
    """This invocation's settings, from the environment (the edge), and --impersonate-service-account;
    every request of the command goes as their identity."""
    if _SET_HERE:
        cfg = Settings.from_environ({k: v for k, v in os.environ.items() if k != NO_PLUGINS})
    else:
        cfg = Settings.from_environ(os.environ)
    if IMPERSONATE:
        cfg = dataclasses.replace(cfg, impersonate_service_account=IMPERSONATE[-1])
    api.use_identity(cfg)
    return cfg


# --impersonate-service-account SA, taken off the command line by cli._main (any command).
IMPERSONATE: list[str] = []


def load(
    spec: Path,
    set_: list[str] | None,
    var: list[str] | None,
    project: str | None,
    region: str | None,
    cfg: Settings,
):
    """Load the spec the way every command does (file < --set < --project/--region)."""
    variables = dict(api.parse_assignments(var, "--var"))
    return api.load_spec(spec, set=set_ or (), vars=variables, project=project, region=region, settings=cfg)


NO_PLUGINS = "PYDANTIC_DISABLE_PLUGINS"
_SET_HERE: list[bool] = []


@contextmanager
def no_pydantic_plugins():
    """Run a command without pydantic's plugin look-up: an entry-point scan of every installed
    distribution when the first model is built, about a sixth of `validate`'s time. typer builds its
    own adapters the same way (pydantic's documented switch, PYDANTIC_DISABLE_PLUGINS); a value
    the user set wins, and the one set here is left out of the settings (and so of the
    environment of the replicas a local run starts)."""
    if NO_PLUGINS in os.environ:
        yield
        return
    os.environ[NO_PLUGINS] = "1"
    _SET_HERE.append(True)
    try:
        yield
    finally:
        _SET_HERE.pop()
        os.environ.pop(NO_PLUGINS, None)


def where(cfg: Settings, project: str | None, region: str | None, need: bool = False) -> dict:
    """--project/--region, else the defaults ($GOOGLE_CLOUD_PROJECT, gcloud's configuration)."""
    found = {"project": project or cfg.project, "region": region or cfg.region}
    if need and not found["project"]:
        raise UserError("no project: pass --project or set $GOOGLE_CLOUD_PROJECT")
    if need and not found["region"]:
        raise UserError("no region: pass --region (e.g. --region us-central1)")
    return found


def resource_argument(what: str, collection: str) -> Any:
    """The argument naming a resource: its full name, or an id with --project/--region. Written
    `Annotated[str, resource_argument(...)]`, an alias the type checker reads."""
    return typer.Argument(
        help=f"{what}: projects/P/locations/R/{collection}/ID, or an ID with --project/--region",
        show_default=False,
    )


def idempotency_key_option(help: str) -> Any:
    """--idempotency-key KEY, with what reusing the key does for this command. Written
    `Annotated[str | None, idempotency_key_option(...)]`, an alias the type checker reads."""
    return typer.Option("--idempotency-key", metavar="KEY", help=help)


@contextmanager
def stop_on_interrupt(
    job, output: OutputFormat, cancel_on_interrupt: bool, *, follow: str, cancel: str, describe: bool = False
) -> Iterator[None]:
    """Ctrl-C inside the block (a --wait): cancel the job (--cancel-on-interrupt) or say how to
    follow (`follow`) and cancel (`cancel`) it; --output json still prints the one object; exit 130."""
    try:
        yield
    except KeyboardInterrupt:
        if cancel_on_interrupt:
            job.cancel()
            stderr_line(f"interrupted: cancel requested, the job is {short_state(job.state)}")
        else:
            stderr_line(
                f"stopped waiting; the job keeps running ({short_state(job.state)}).\n"
                f"  follow it:  {follow}\n"
                f"  cancel it:  {cancel}"
            )
        if output is OutputFormat.json:
            emit_json(job.describe() if describe else job.to_dict())
        raise typer.Exit(130) from None


def emit_json(obj) -> None:
    """The command's one JSON object on stdout (--output json); a failure after it (a job that
    ended FAILED, check's FAIL items) adds no second one (cli.LazyGroup.invoke reads EMITTED)."""
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")
    EMITTED[:] = [True]


# [True] once this invocation has written its JSON object on stdout (emit_json, emit_failure).
EMITTED: list[bool] = []


def emit_failure(obj: dict) -> None:
    """A failure's `{"error": {...}}` object on stdout, on one line (after `logs -o json`'s
    entries it is one more line of the stream), once: nothing when an object was written already
    or stdout is gone (the error's text on stderr is what is left)."""
    if EMITTED:
        return
    EMITTED[:] = [True]
    out = sys.stdout  # None when the process started with stdout closed (`>&-`)
    try:
        if out is not None:
            out.write(json.dumps(obj) + "\n")
            out.flush()
    except (OSError, ValueError):  # a closed pipe or stream: the text on stderr still says it
        pass


def stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def err_console() -> Console:
    # rich (~50 modules) only when a command draws on stderr, not for --help or a plain answer
    from rich.console import Console

    return Console(stderr=True, highlight=False)
