"""The trainer's one log line: `trainer: <message>` on stdout, flushed, so the job's logs hold the
stages in the order they ran (task.py, plan.py, corrupt.py write through it)."""

from __future__ import annotations


def log(message: str) -> None:
    """Print `message` as one `trainer:` line, at once."""
    print(f"trainer: {message}", flush=True)
