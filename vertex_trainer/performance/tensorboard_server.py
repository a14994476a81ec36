"""`vertex-trainer tensorboard`: TensorBoard on 127.0.0.1 over a run's logs, until Ctrl-C.

The logs are served where they are: a local run's folder, or a Vertex AI job's gs:// folder (which
TensorBoard reads itself, with this machine's credentials). A sandbox job's objects live in the
sandbox's Cloud Storage emulator (in memory, emulators/gcs.py), which TensorBoard cannot reach:
they are copied through the project's storage client into a scratch folder, removed on stop.

TensorBoard runs as its own process (`python -m vertex_trainer.performance.tensorboard_guard`,
TensorBoard's main behind a loopback Host/Origin check: it imports TensorFlow when installed,
seconds this command need not wait for twice), bound to 127.0.0.1 only (never 0.0.0.0); the
URL is read off its start-up line. With xprof installed (the `profile` extra) its Profile tab
shows the run's profiler traces.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vertex_trainer import lazy
from vertex_trainer.errors import UserError
from vertex_trainer.gcp import storage
from vertex_trainer.settings import Settings
from vertex_trainer.sizes import human_size

__all__ = ["HOST", "Board", "copy_prefix", "start"]

HOST = "127.0.0.1"  # loopback only: the logs are the user's, never served to the network
START_SECONDS = 180.0  # TensorBoard's import of TensorFlow is slow on a busy machine
MAX_OBJECTS = 20_000
MAX_BYTES = 4 << 30
_URL = re.compile(r"TensorBoard \S+ at (http://127\.0\.0\.1:\d+/)")


@dataclass
class Board:
    """A running TensorBoard: its URL, the folder it serves, its process; `stop()` ends it (and
    removes a scratch copy)."""

    url: str
    logdir: str
    process: subprocess.Popen[str] = field(repr=False)
    scratch: str | None = None
    output: deque[str] = field(default_factory=lambda: deque(maxlen=20), repr=False)  # its last lines

    def wait(self) -> int:
        """Block until TensorBoard ends. Returns: its exit code."""
        return self.process.wait()

    def stop(self) -> None:
        """End TensorBoard (terminate, then kill after 10 s) and remove the scratch copy."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> Board:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def copy_prefix(settings: Settings, uri: str, target: Path) -> int:
    """Copy every object below gs://bucket/prefix/ into `target` (the same relative paths),
    through the project's storage client; at most MAX_OBJECTS objects and MAX_BYTES.

    Args:
        settings: the process settings (the storage endpoint: the sandbox's emulator).
        uri: the gs:// folder.
        target: the local folder to fill.
    Returns:
        the number of objects copied.
    """
    bucket, prefix = storage.split_uri(uri.rstrip("/"))
    prefix = f"{prefix}/" if prefix else ""
    copied, total = 0, 0
    client = storage.client(settings)
    for blob in client.list_blobs(bucket, prefix=prefix, max_results=MAX_OBJECTS):
        relative = blob.name[len(prefix) :]
        parts = relative.split("/")
        # Only a path below `target`: an object named PREFIX//home/you/.bashrc is "/home/you/
        # .bashrc" once the prefix is cut (and `target / "/x"` is /x); '.', '..', empty segments,
        # a folder placeholder (ends in /) and a name under an object that is a file are skipped.
        if any(p in ("", ".", "..") for p in parts):
            continue
        path = target.joinpath(*parts)
        if any(d.is_file() for d in path.parents[: len(parts) - 1]) or path.is_dir():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        # the listing's size first, then a read no further than the bound: each object was
        # downloaded whole and then counted, so one of any size in the bucket was held in memory
        if total + int(blob.size or 0) > MAX_BYTES:
            raise _too_many(uri)
        data = storage.read_bytes(settings, f"gs://{bucket}/{blob.name}", MAX_BYTES - total)
        if data is None:  # deleted since the listing
            continue
        total += len(data)
        if total > MAX_BYTES:  # (grown since the listing)
            raise _too_many(uri)
        path.write_bytes(data)
        copied += 1
    return copied


def _too_many(uri: str) -> UserError:
    return UserError(
        f"tensorboard: the logs under {uri} are over {human_size(MAX_BYTES)}, too many to copy here",
        hint="open them in Vertex AI TensorBoard, or point TensorBoard at a smaller folder",
    )


def _lines(stream: Any, out: queue.Queue[str | None], kept: deque[str]) -> None:
    for line in stream:
        kept.append(line.rstrip())
        out.put(line)
    out.put(None)


def start(
    logdir: str,
    *,
    port: int | None = None,
    environ: Mapping[str, str] | None = None,
    scratch: str | None = None,
    timeout: float = START_SECONDS,
) -> Board:
    """Start TensorBoard on 127.0.0.1 over `logdir` and wait for its URL.

    Args:
        logdir: a local folder or a gs:// URI.
        port: the port (0: one the system picks; None: TensorBoard's 6006, or the next free one).
        environ: the environment of its process (None: this process's).
        scratch: a folder to remove on stop (a copy of a sandbox job's logs).
        timeout: seconds to wait for it to serve.
    Returns:
        the Board, serving. Raises UserError (exit 2) when tensorboard is not installed or
        TensorBoard ends before it serves (its last lines in the message).
    """
    if not lazy.available("tensorboard"):
        raise lazy.missing("tensorboard")
    # TensorBoard's main behind a loopback Host/Origin check (performance/tensorboard_guard.py)
    guard = "vertex_trainer.performance.tensorboard_guard"
    command = [sys.executable, "-m", guard, "--logdir", logdir, "--host", HOST]
    command += ["--port", "default" if port is None else str(port)]
    env = None if environ is None else {**environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,  # Ctrl-C reaches this process only; stop() ends TensorBoard
    )
    lines: queue.Queue[str | None] = queue.Queue()
    board = Board("", logdir, process, scratch)
    threading.Thread(target=_lines, args=(process.stdout, lines, board.output), daemon=True).start()
    try:
        while True:
            line = lines.get(timeout=timeout)
            if line is None:
                break
            match = _URL.search(line)
            if match:
                board.url = match.group(1)
                return board
    except queue.Empty:
        pass
    board.stop()
    last = "\n    ".join(list(board.output)[-5:]) or "no output"
    raise UserError(
        f"tensorboard: TensorBoard did not start serving {logdir} on {HOST}"
        + (f" (port {port})" if port is not None else ""),
        hint=f"its last lines:\n    {last}",
    )


def scratch_dir() -> str:
    """A new scratch folder for a copy of a job's logs."""
    return tempfile.mkdtemp(prefix="vertex-trainer-tensorboard-")


def local_logdir(run_dir: str) -> str:
    """The folder to serve for a local run: its logs/ (the bundled trainer's TensorBoard folder:
    runs train and validation) when there is one, else the run's folder."""
    logs = os.path.join(run_dir, "logs")
    return logs if os.path.isdir(logs) else run_dir
