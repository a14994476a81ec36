"""How the trainer's process ends: once its output is out, without the interpreter's teardown."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys


def exit_now(code: int) -> None:
    """End the process with `code` once the run's output is out, skipping the interpreter's teardown.

    By the time main() returns, everything the run writes is closed: checkpoints and the export are
    written synchronously, metrics.json by us, the TensorBoard writers by the Keras callback at the
    end of training. What is left is tearing down TensorFlow's modules and objects, 1-1.5 s of CPU
    per process on a 2-vCPU machine (a replica, a trial, a bench run: benchmarks/RESULTS-trainer.md).
    Its one effect outside the process, autograph's removal of the modules it wrote to the temp
    folder (an atexit hook), is done here."""
    sys.stdout.flush()
    sys.stderr.flush()
    for name, module in list(sys.modules.items()):
        source = getattr(module, "__file__", None)
        if name.startswith("__autograph_generated_file") and source:
            for path in (source, importlib.util.cache_from_source(source)):
                with contextlib.suppress(OSError):
                    os.remove(path)
    os._exit(code)
