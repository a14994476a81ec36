"""TensorFlow's C++ start-up banner, kept off the screen of a command that loads TensorFlow.

absl writes the banner ("All log messages before absl::InitializeLog() ...", oneDNN, the CPU
feature guard) to file descriptor 2 when TensorFlow's runtime starts, before
TF_CPP_MIN_LOG_LEVEL can apply, so the variable cannot hide it. `quiet_startup()` points fd 2 at
a temporary file while TensorFlow starts, then writes back every line that is not the banner
(a real error, a Python traceback), in order. vertex_trainer.local.display keeps the same pattern
for replica logs (the container's trainer never imports the host tool, so each has its own copy).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator

BANNER = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|[IW]\d{4} [\d:. ]+\d+ (port|cpu_feature_guard|cuda_\w+|gpu_\w+)\.cc:\d+\] "
    r"|To enable the following instructions: .* rebuild TensorFlow)"
)

# Any line of TensorFlow's native (absl) log: `W0000 00:00:1796119550.033928 23345 file.cc:196] ...`.
NATIVE = re.compile(r"^[IWEF]\d{4} [\d:. ]+\d+ [\w./-]+\.cc:\d+\] ")
_LOCK = threading.Lock()  # fd 2 is the process's: one redirection at a time


def is_banner(line: str) -> bool:
    """Whether `line` belongs to TensorFlow's start-up banner (not the program's own output).

    Args:
        line: one line of output, with or without its newline.
    Returns:
        True for a banner line."""
    return bool(BANNER.match(line))


@contextlib.contextmanager
def quiet_startup(fd: int = 2, *, native_on_error: bool = True) -> Iterator[None]:
    """While the block runs, file descriptor `fd` (stderr) goes to a temporary file; at the end
    every line but the banner's is written back to it. Nested or concurrent uses pass through.

    Args:
        fd: the descriptor to filter (2, stderr).
        native_on_error: False: when the block raises, TensorFlow's native log lines are dropped
            too (the exception says what failed; the caller turns it into one message).
    Yields:
        None; the block runs with the descriptor redirected."""
    if not _LOCK.acquire(blocking=False):
        yield
        return
    try:
        try:
            saved = os.dup(fd)
        except OSError:  # no such descriptor (an embedded interpreter): nothing to filter
            yield
            return
        with tempfile.TemporaryFile() as held:
            _flush()
            os.dup2(held.fileno(), fd)
            failed = True
            try:
                yield
                failed = False
            finally:
                _flush()
                os.dup2(saved, fd)
                os.close(saved)
                held.seek(0)
                drop_native = failed and not native_on_error
                kept = [
                    line
                    for line in held.read().decode(errors="replace").splitlines(keepends=True)
                    if not is_banner(line) and not (drop_native and NATIVE.match(line))
                ]
                if kept:
                    os.write(fd, "".join(kept).encode())
    finally:
        _LOCK.release()


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
