"""What the CLI tests share: the command that runs vertex-trainer, the environment of an edge
process pointed at local fakes (fast retries and polls, no gcloud configuration, none of the
caller's Google settings), and `invoke`, which runs the CLI in this process as that process would
have run it (issue 31: a subprocess pays Python's start-up and the CLI's imports again, about a
second of CPU for each of the suite's CLI runs).
"""

from __future__ import annotations

import atexit
import gc
import io
import os
import signal
import subprocess
import sys
import traceback
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

FAST_RETRY = "attempts=4,initial=0.01,maximum=0.05,deadline=10,read_timeout=5"


def cli_command() -> list[str]:
    """The installed `vertex-trainer` script, else the module."""
    script = Path(sys.executable).parent / "vertex-trainer"
    return [str(script)] if script.exists() else [sys.executable, "-m", "vertex_trainer"]


def edge_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """os.environ without VERTEX_TRAINER_*/GOOGLE_*/CLOUDSDK_*/CLOUD_ML_*/STORAGE_EMULATOR*, plus fast
    retries and polls, a private empty gcloud config, and `settings` (e.g.
    VERTEX_TRAINER_API_ENDPOINT=...)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VERTEX_TRAINER_", "GOOGLE_", "CLOUDSDK_", "CLOUD_ML_", "STORAGE_EMULATOR"))
    }
    gcloud = tmp_path / "gcloud-config"
    gcloud.mkdir(exist_ok=True)
    env.update(
        {
            "VERTEX_TRAINER_RETRY": FAST_RETRY,
            "VERTEX_TRAINER_POLL_INTERVAL": "0.02",
            "CLOUDSDK_CONFIG": str(gcloud),
            "NO_GCE_CHECK": "true",
            "COLUMNS": "200",
        }
    )
    env.update(settings)
    return env


def gcloud_config(directory: Path, vertex_url: str, project: str = "test-project") -> Path:
    """A private gcloud configuration (CLOUDSDK_CONFIG) that sends `gcloud ai ...` to the fake
    Vertex AI at `vertex_url` without credentials: what `gcloud config set` would write, written
    directly (each gcloud call costs ~0.6 s). Returns `directory`."""
    (directory / "configurations").mkdir(parents=True, exist_ok=True)
    (directory / "active_config").write_text("default")
    (directory / "configurations" / "config_default").write_text(
        f"[api_endpoint_overrides]\naiplatform = {vertex_url}/\n\n"
        "[auth]\ndisable_credentials = true\n\n"
        f"[core]\nproject = {project}\ndisable_usage_reporting = true\n\n"
        "[component_manager]\ndisable_update_check = true\n"
    )
    return directory


_NO_SOCKET = """\
import os, sys
def _hook(event, args):
    if event in ("socket.connect", "socket.getaddrinfo"):
        sys.stderr.write(f"SOCKET USED: {event} {args[1:]!r}\\n"); sys.stderr.flush(); os._exit(99)
sys.addaudithook(_hook)
"""


def no_socket_hook(directory: Path) -> str:
    """A sitecustomize.py in `directory` (made here) whose audit hook ends a Python process that
    has it on its PYTHONPATH (exit 99, "SOCKET USED: ..." on stderr) at its first socket connect
    or name look-up: a command that must open no connection. Returns `directory`, for PYTHONPATH."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(_NO_SOCKET)
    return str(directory)


@dataclass
class CliResult:
    """What an in-process run of the CLI gave: its exit code, stdout and stderr."""

    code: int
    out: str
    err: str


def run_in_process(*args: object) -> CliResult:
    """The CLI in this process with this process's environment and directory (`invoke`)."""
    done = invoke(args)
    return CliResult(done.returncode, done.stdout, done.stderr)


def invoke(
    args: Sequence[object], *, env: Mapping[str, str] | None = None, cwd: str | Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`vertex-trainer ARGS` in this process, as the console script runs it (`main(args)`), seen as
    a subprocess would be: os.environ is `env` (default: unchanged) and the working directory is
    `cwd` during the call, stdin is empty, stdout and stderr are captured and decoded as
    `subprocess.run(text=True)` decodes a child's; SystemExit is the exit code, an uncaught
    exception is exit 1 with its traceback on stderr. What one call changes in the process (the
    environment, the directory, the collector, signal handlers, the root logger's handlers,
    warning filters and their once-only registries, sys.argv) is put back before it returns.

    Args:
        args: the command line after `vertex-trainer`.
        env: the whole environment of the call (None: this process's own).
        cwd: the working directory of the call (None: this process's own).

    Returns:
        A CompletedProcess (text) with the exit code, stdout and stderr.
    """
    from vertex_trainer.cli import main

    argv = [str(a) for a in args]
    out, err = _Capture("strict"), _Capture("backslashreplace")
    with _one_process(argv, env, cwd, out.stream, err.stream):
        try:
            main(argv)
            code = 0
        except SystemExit as e:
            code = _exit_status(e.code, err.stream)
        except Exception:
            traceback.print_exc(file=err.stream)  # what the interpreter prints, then exit 1
            code = 1
    return subprocess.CompletedProcess([*cli_command(), *argv], code, out.text(), err.text())


class _Capture:
    """A text stream over bytes, as a pipe's: UTF-8 in, read back as subprocess.run(text=True)
    reads a child's output (universal newlines: a progress line's lone \\r becomes \\n there)."""

    def __init__(self, errors: str):
        self.raw = io.BytesIO()
        self.stream = io.TextIOWrapper(self.raw, encoding="utf-8", errors=errors, write_through=True)

    def text(self) -> str:
        self.stream.flush()
        data = self.raw.getvalue().decode("utf-8")
        return data.replace("\r\n", "\n").replace("\r", "\n")


def _exit_status(code: object, stderr: TextIO) -> int:
    """The exit status of `raise SystemExit(code)`, as the interpreter makes it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=stderr)
    return 1


@contextmanager
def _one_process(
    argv: list[str], env: Mapping[str, str] | None, cwd: str | Path | None, out: TextIO, err: TextIO
) -> Iterator[None]:
    """The call's view of the process (environment, directory, standard streams, argv, fresh
    warning filters), and afterwards the process as it was: each test starts where a new process
    would (a state one call left behind must not decide the next test)."""
    import logging

    environ = dict(os.environ)
    here = os.getcwd()
    streams = sys.stdin, sys.stdout, sys.stderr
    saved_argv = sys.argv
    handlers = _signal_handlers()
    root = logging.getLogger()
    root_handlers, root_level, disabled = list(root.handlers), root.level, logging.root.manager.disable
    collecting = gc.isenabled()
    try:
        if env is not None:
            # In place: os.environ is the mapping rich consoles and click read (COLUMNS, TERM).
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        sys.argv = [cli_command()[0], *argv]
        sys.stdin, sys.stdout, sys.stderr = io.StringIO(""), out, err
        with warnings.catch_warnings():
            _fresh_warning_filters()
            yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = streams
        sys.argv = saved_argv
        os.chdir(here)
        if dict(os.environ) != environ:
            os.environ.clear()
            os.environ.update(environ)
        for signum, handler in handlers.items():
            if signal.getsignal(signum) is not handler:
                signal.signal(signum, handler)
        for handler in root.handlers[:]:
            if handler not in root_handlers:
                root.removeHandler(handler)
                handler.close()
        root.setLevel(root_level)
        logging.disable(disabled)
        # A quick command asks for gc.freeze at exit (cli/__init__.py); this process does not end.
        atexit.unregister(gc.freeze)
        if collecting and not gc.isenabled():
            gc.enable()


def _signal_handlers() -> dict[int, Any]:
    """The Python-level handler of every signal that has one (None: set outside Python)."""
    found: dict[int, Any] = {}
    for signum in signal.valid_signals():
        try:
            handler = signal.getsignal(signum)
        except (OSError, ValueError):
            continue
        if handler is not None:
            found[signum] = handler
    return found


def _fresh_warning_filters() -> None:
    """The warning filters of a new interpreter (-W options aside): the defaults, PYTHONWARNINGS
    ahead of them; warnings show on sys.stderr, each once per place, as they would in the console
    script, and not in pytest's warning summary."""
    warnings.resetwarnings()
    for category in (ResourceWarning, ImportWarning, PendingDeprecationWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category)
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
    for option in [o for o in os.environ.get("PYTHONWARNINGS", "").split(",") if o]:
        try:
            warnings._setoption(option)  # type: ignore[attr-defined]  # how -W/PYTHONWARNINGS are read
        except warnings._OptionError:
            pass
    warnings.showwarning = _show_on_stderr


def _show_on_stderr(
    message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))
