"""How an epoch is cut into executions: `steps_per_execution` and the epoch it divides; and which
executions a `--profile-steps=A,B` window traces.

Pure and import-free, so vertex-trainer's bench (performance/benchmark.py, through spec/trainer.py)
cuts its short epoch with this very function and the bench measures what the trainer would run.
"""

from __future__ import annotations

__all__ = ["choose_steps_per_execution", "parse_profile_steps", "profile_executions"]


def choose_steps_per_execution(
    steps_per_epoch: int, requested: int, *, cap: int = 100, min_executions: int = 1
) -> tuple[int, int]:
    """(steps_per_execution, steps_per_epoch) with steps_per_epoch a multiple of the first.

    Requested (> 0): clipped to the epoch, and the epoch rounded down to a multiple of it.
    Automatic (0): the epoch is split into ceil(steps/cap) equal executions; the epoch is
    rounded to the nearest multiple (a few steps at most), so callbacks still run a few
    times an epoch while the host rarely waits on the accelerator. An epoch that choice cuts
    into fewer than `min_executions` executions is cut into that many instead, when it has that
    many steps (the bench measures every execution but the first, which traces and compiles).

    Args:
        steps_per_epoch: the steps of one epoch, from the flags or the counted records (>= 1).
        requested: --steps-per-execution (0: choose).
        cap: the most steps of an automatic execution.
        min_executions: the fewest executions an epoch is cut into.
    Returns:
        (steps_per_execution, steps_per_epoch), the second a multiple of the first.
    Raises:
        ValueError: steps_per_epoch < 1 (the callers count whole batches first and say why).
    """
    if steps_per_epoch < 1:
        raise ValueError(f"steps per epoch must be >= 1, got {steps_per_epoch}")
    if requested > 0:
        spe = min(requested, steps_per_epoch)
        epoch = (steps_per_epoch // spe) * spe
    else:
        executions = -(-steps_per_epoch // cap)
        spe = max(1, round(steps_per_epoch / executions))
        epoch = max(spe, round(steps_per_epoch / spe) * spe)
    if epoch // spe >= min_executions:
        return spe, epoch
    # Too few executions: the longest that leaves min_executions, the epoch rounded down to them.
    spe = max(1, steps_per_epoch // min_executions)
    return spe, (steps_per_epoch // spe) * spe


def parse_profile_steps(text: str, total_steps: int = 0) -> tuple[int, int] | None:
    """`--profile-steps` "A,B" -> (A, B): the steps (1-based, counted from the start of this
    process's training) whose executions TensorFlow's profiler traces; "" -> None.

    Raises:
        ValueError: not two integers, A < 1, B < A, or B past `total_steps` (when known, > 0);
            the message says what is wrong and how to write it.
    """
    text = text.strip()
    if not text:
        return None
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"must be two step numbers 'A,B' (e.g. '10,20'), got {text!r}")
    first, last = int(parts[0]), int(parts[1])
    if first < 1 or last < first:
        raise ValueError(f"must be 'A,B' with 1 <= A <= B (steps count from 1), got {text!r}")
    if total_steps > 0 and last > total_steps:
        raise ValueError(f"{text!r} ends past the run's {total_steps} steps: choose B <= {total_steps}")
    return first, last


def profile_executions(window: tuple[int, int], steps_per_execution: int) -> tuple[int, int]:
    """The executions (1-based, as Keras' TensorBoard `profile_batch` counts them: its batch hooks
    run once per execution) that hold steps A..B: the window widened to whole executions."""
    spe = max(1, steps_per_execution)
    return -(-window[0] // spe), -(-window[1] // spe)
