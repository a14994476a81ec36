"""GCPC's launchers as the sandbox's pipeline tasks run them: polling at the sandbox's pace.

    python -m vertex_trainer.sandbox.launcher --poll-interval S MODULE ARG...

runs MODULE (`google_cloud_pipeline_components.container.v1.custom_job.launcher`, ...) as
`python -m MODULE ARG...` would, with one difference: `_POLLING_INTERVAL_IN_SECONDS`, the seconds
each of GCPC's remote runners sleeps between two looks at its job or operation (20 on Google
Cloud), is S in every GCPC module MODULE loads. The requests, the states they see, the outputs
they write and the exit codes are GCPC's own; only the sleeps are shorter, as the sandbox's own
clients poll every second (`VERTEX_TRAINER_POLL_INTERVAL=1`): the stand-ins answer at once, so
a pipeline's four GCPC steps would otherwise spend about 80 s asleep (docs/sandbox.md).

The sandbox (sandbox/pipelines.py) puts this in front of a task's `python -m
google_cloud_pipeline_components...` command; any other command runs as written.

    python -m vertex_trainer.sandbox.launcher --poll-interval S --args-file FILE MODULE

is the form the sandbox runs (`hide_args`): MODULE's arguments are read from FILE (a JSON list,
this user's alone, removed once read), not from the command line, which every user of the
machine sees (`ps`): GCPC's `--payload` is the whole CustomJob, the values of its env with it.
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import sys
import tempfile

CONSTANT = "_POLLING_INTERVAL_IN_SECONDS"
PACKAGE = "google_cloud_pipeline_components"
USAGE = (
    "usage: python -m vertex_trainer.sandbox.launcher --poll-interval SECONDS "
    "[--args-file FILE MODULE | MODULE [ARG...]]"
)
ARGS_FILE = "--args-file"


def wrap(argv: list[str], poll_s: float) -> list[str]:
    """`argv` (a task's command, its Python first) with this module in front when it runs one of
    GCPC's modules (`PYTHON [-u] -m google_cloud_pipeline_components...`); else `argv` as is."""
    try:
        at = argv.index("-m", 1)
    except ValueError:
        return argv
    if at + 1 >= len(argv) or not argv[at + 1].startswith(PACKAGE + "."):
        return argv
    return [*argv[:at], "-m", __name__, "--poll-interval", repr(poll_s), *argv[at + 1 :]]


def hide_args(argv: list[str], directory: str) -> list[str]:
    """A command `wrap` made, with MODULE's arguments moved into a new file in `directory` that
    only this user can read (the module docstring says why); any other command as is."""
    head = ["-m", __name__, "--poll-interval"]
    at = next((i for i in range(len(argv)) if argv[i : i + 3] == head), None)
    if at is None or len(argv) < at + 5:
        return argv
    module, args = argv[at + 4], argv[at + 5 :]
    fd, path = tempfile.mkstemp(prefix="launcher-args-", suffix=".json", dir=directory)  # 0600
    with open(fd, "w", encoding="utf-8") as f:
        json.dump(args, f)
    return [*argv[: at + 4], ARGS_FILE, path, module]


def set_poll_interval(seconds: float) -> list[str]:
    """Set CONSTANT to `seconds` in every loaded GCPC module that has it; returns their names."""
    changed = []
    for name, module in list(sys.modules.items()):
        if name.startswith(PACKAGE + ".") and hasattr(module, CONSTANT):
            setattr(module, CONSTANT, seconds)
            changed.append(name)
    return sorted(changed)


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[0] != "--poll-interval":
        sys.exit(USAGE)
    try:
        seconds = float(argv[1])
    except ValueError:
        sys.exit(f"--poll-interval: {argv[1]!r} is not a number of seconds\n{USAGE}")
    module, args = argv[2], argv[3:]
    if module == ARGS_FILE:
        if len(argv) != 5:
            sys.exit(USAGE)
        with open(argv[3], encoding="utf-8") as f:
            args = json.load(f)
        os.unlink(argv[3])  # read once: no copy of the payload stays behind
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            sys.exit(f"{ARGS_FILE} {argv[3]}: not a JSON list of strings\n{USAGE}")
        module = argv[4]
    # Imported once for the remote runners it imports (where the constant lives), then run afresh
    # as __main__; out of sys.modules first, so that runpy does not warn it was imported already.
    importlib.import_module(module)
    set_poll_interval(seconds)
    del sys.modules[module]
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
