"""Checkpoints for preemption: on a time budget, at every epoch end, and on SIGTERM.

Vertex AI sends SIGTERM before it stops a Spot (preemptible) VM and SIGKILLs the container
about 30 s later. `PreemptionCheckpoint` (tf-keras' BackupAndRestore, whose checkpoint also
holds the epoch and the step, so a rerun resumes mid-epoch) saves

  - every `interval_secs` of training (--checkpoint-interval-secs, default 600): a Spot
    preemption loses at most that much work, at a cost of one save per interval;
  - at the end of every epoch (a finished epoch is never redone);
  - when SIGTERM arrives: the handler only sets a flag; the next execution end saves and
    raises `Preempted` (the trainer exits 143 without exporting; the rerun resumes there).

Every save runs between two executions, never inside one, and is timed (`saves`), so the
trainer's throughput leaves it out and metrics.json reports it (`checkpoint_seconds`). The
check on the hot path is one clock read per execution. With several workers (multi-worker
MirroredStrategy) saves stay at epoch ends: a save reads mirrored values with collectives, so
every worker must save at the same step, and a wall clock does not agree across machines.

A Keras 3 model (trainer/keras_choice.py) gets Keras 3's BackupAndRestore underneath: the same
saves, into <backup_dir>/chief (the model's and the optimizer's variables, latest.weights.h5,
and training_metadata.json); Keras 3's fit cannot start mid-epoch, so a rerun after a mid-epoch
save resumes at the start of that epoch with the saved weights and optimizer state (that epoch's
steps before the save run again; the learning-rate schedule goes on from the saved step count).
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
import signal
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from trainer._keras import KERAS3, keras

DEFAULT_INTERVAL_SECS = 600.0


class Preempted(Exception):
    """SIGTERM arrived during training; a checkpoint was saved (the trainer exits 143)."""


@dataclasses.dataclass(frozen=True)
class Save:
    """One checkpoint: when it started (time.perf_counter), how long it took, and why."""

    started: float
    seconds: float
    reason: str  # time | epoch | sigterm
    epoch: int  # 0-based
    step: int  # steps of that epoch done


class PreemptionCheckpoint(keras.callbacks.BackupAndRestore):
    """BackupAndRestore on a time budget, at epoch ends and on SIGTERM (see the module doc).

    Args:
        backup_dir: where the checkpoint goes (--checkpoint-dir; the same on a rerun).
        steps_per_epoch: the epoch's steps (to tell a finished epoch from a partial one).
        interval_secs: seconds of training between time-based saves; 0 = epoch ends only.
        timed: False with several workers: epoch ends (and no SIGTERM save) only.
    """

    def __init__(
        self,
        backup_dir: str,
        *,
        steps_per_epoch: int,
        interval_secs: float = DEFAULT_INTERVAL_SECS,
        timed: bool = True,
    ):
        if KERAS3:  # Keras 3 deletes its backup_dir after training: a folder of its own
            super().__init__(backup_dir=posixpath.join(backup_dir, "chief"), save_freq="epoch")
        else:
            # save_freq=1 makes the checkpoint record the step, so a rerun resumes mid-epoch; when
            # to save is decided here (on_train_batch_end), not by the base class's step count.
            super().__init__(backup_dir=backup_dir, save_freq=1)
        self.steps_per_epoch = steps_per_epoch
        self.interval_secs = interval_secs if timed else 0.0
        self.timed = timed
        self.saves: list[Save] = []
        self.resumed: tuple[int, int] | None = None  # (epoch, step) a rerun continues at
        self.terminated = False
        self._last_save = 0.0
        self._epoch = 0  # the epoch running (0-based)
        self._previous_handler: Callable[[int, FrameType | None], Any] | int | None = None

    # -- SIGTERM -----------------------------------------------------------------------------------

    def install_sigterm_handler(self) -> bool:
        """Catch SIGTERM (main thread only): save at the next execution end, then stop. Returns
        whether it was installed (not with several workers, nor off the main thread)."""
        if not self.timed:
            return False
        try:
            self._previous_handler = signal.signal(signal.SIGTERM, self._on_sigterm)
        except ValueError:  # not the main thread
            return False
        return True

    def restore_sigterm_handler(self) -> None:
        """Put back the handler install_sigterm_handler replaced."""
        if self._previous_handler is not None:
            signal.signal(signal.SIGTERM, self._previous_handler)
            self._previous_handler = None

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self.terminated = True

    # -- Keras hooks -------------------------------------------------------------------------------

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        super().on_train_begin(logs)  # restores the last checkpoint, if any
        if KERAS3:
            self._keras3_resumed()
        else:
            state = self._training_state
            epoch, batch = int(state._ckpt_saved_epoch.numpy()), int(state._ckpt_saved_batch.numpy())
            if epoch >= 0 and batch >= 0:
                done = batch + 1
                self.resumed = (epoch + 1, 0) if done >= self.steps_per_epoch else (epoch, done)
        self._last_save = time.monotonic()

    def _keras3_resumed(self) -> None:
        """Keras 3 restored the weights and set the epoch fit starts at (its metadata's)."""
        import tensorflow as tf

        if not tf.io.gfile.exists(self._training_metadata_path):
            return
        with tf.io.gfile.GFile(self._training_metadata_path) as f:
            saved = json.loads(f.read())
        epoch, batch = int(saved["epoch"]), int(saved["batch"])
        self.resumed = (epoch, 0)
        if batch:  # a mid-epoch save: Keras 3 starts the epoch again (see the module doc)
            print(
                f"trainer: Keras 3 resumes at the start of epoch {epoch + 1}: the {batch} steps of "
                "it done before the checkpoint run again (Keras 3's fit cannot start mid-epoch)",
                flush=True,
            )

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        super().on_epoch_begin(epoch, logs)
        self._epoch = epoch

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        pass  # the base class writes the step into a variable every execution; _save does it once

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if self.terminated:
            self._save(self._epoch, batch, "sigterm")
            raise Preempted(
                f"SIGTERM: saved a checkpoint at epoch {self._epoch + 1} step "
                f"{batch + 1}/{self.steps_per_epoch} in {self.backup_dir}; a rerun with the "
                "same --checkpoint-dir resumes there"
            )
        if self.interval_secs > 0 and time.monotonic() - self._last_save >= self.interval_secs:
            self._save(self._epoch, batch, "time")

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._save(epoch, self.steps_per_epoch - 1, "epoch")

    def _save(self, epoch: int, batch: int, reason: str) -> None:
        started = time.perf_counter()
        if KERAS3:  # its metadata: the epoch a rerun starts at, and the steps of it done
            done = batch + 1 >= self.steps_per_epoch
            self._current_epoch, self._last_batch_seen = (epoch + 1, 0) if done else (epoch, batch + 1)
            self._save_model()
        else:
            state = self._training_state
            state._ckpt_saved_epoch.assign(epoch)
            state._ckpt_saved_batch.assign(batch)
            state.back_up(epoch=epoch, batch=batch)
        save = Save(started, time.perf_counter() - started, reason, epoch, batch + 1)
        self.saves.append(save)
        self._last_save = time.monotonic()
        if reason != "epoch":  # an epoch's progress line already says it is done (and saved)
            print(
                f"trainer: checkpoint ({reason}) at epoch {epoch + 1} "
                f"step {batch + 1}/{self.steps_per_epoch} in {save.seconds:.2f} s",
                flush=True,
            )

    # -- results -----------------------------------------------------------------------------------

    def seconds_between(self, start: float, end: float) -> float:
        """Seconds spent saving in [start, end] (time.perf_counter values)."""
        return sum(s.seconds for s in self.saves if start <= s.started < end)

    def summary(self) -> dict[str, Any]:
        """The metrics.json fields: checkpoint_seconds, checkpoints, checkpoint_interval_secs."""
        return {
            "checkpoint_seconds": round(sum(s.seconds for s in self.saves), 4),
            "checkpoints": len(self.saves),
            "checkpoint_interval_secs": self.interval_secs,
        }
