"""Progress/throughput logging and the Vertex hyperparameter-tuning report."""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from trainer._keras import keras


def progress_line(
    epoch: int, epochs: int, step: int, steps: int, examples_per_sec: float, loss: float, **extra: Any
) -> str:
    """`progress epoch=2/5 step=40/100 examples_per_sec=1234.5 loss=0.42 ...` (parsed by the runner)."""
    text = (
        f"progress epoch={epoch}/{epochs} step={step}/{steps} "
        f"examples_per_sec={examples_per_sec:.1f} loss={loss:.4f}"
    )
    return text + "".join(f" {k}={v}" for k, v in extra.items())


class Progress(keras.callbacks.Callback):
    """Logs examples/s and step time per epoch (and every `interval_secs` within one).

    Keras calls batch hooks once per execution (every steps_per_execution steps); the logs stay
    tensors (no host sync) unless a line is printed. Per-epoch rates leave out the time spent
    saving checkpoints (`checkpoint`, a trainer.checkpoint.PreemptionCheckpoint before this
    callback in fit's list); on a resumed run the first epoch counts only the steps it ran.
    With a `meter` (trainer.throughput, also before this callback) each line shows the epoch's
    measured input wait and host round trips (the share of the time between executions).
    """

    def __init__(
        self,
        *,
        global_batch: int,
        steps_per_epoch: int,
        epochs: int,
        interval_secs: float = 30.0,
        backup_dir: str = "",
        out: Any = None,
        meter: Any = None,
        checkpoint: Any = None,
    ) -> None:
        super().__init__()
        self._supports_tf_logs = True  # no numpy conversion of the logs per execution
        self.meter = meter
        self.checkpoint = checkpoint
        self.global_batch = global_batch
        self.steps_per_epoch = steps_per_epoch
        self.epochs = epochs
        self.interval_secs = interval_secs
        self.backup_dir = backup_dir
        self.out = out or sys.stdout
        self.epoch_rates: list[float] = []
        self.epoch_seconds: list[float] = []
        self.first_epoch: int | None = None
        self.last_loss: float | None = None
        self._first_step = 0

    def _print(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._first_step = 0
        if self.first_epoch is None:
            self.first_epoch = epoch
            resumed = self.checkpoint.resumed if self.checkpoint is not None else None
            if resumed is not None and resumed[0] == epoch and resumed[1] > 0:
                self._first_step = resumed[1]
                self._print(
                    f"resumed from backup in {self.backup_dir}: continuing at epoch "
                    f"{epoch + 1}/{self.epochs} step {resumed[1] + 1}/{self.steps_per_epoch} "
                    f"({epoch} epochs and {resumed[1]} steps done before)"
                )
            elif epoch > 0:
                self._print(
                    f"resumed from backup in {self.backup_dir}: continuing at epoch "
                    f"{epoch + 1}/{self.epochs} ({epoch} epochs done before)"
                )
        self._epoch_start = self._last_log = time.perf_counter()
        self._steps_done = 0

    def _working_seconds(self, now: float) -> float:
        saving = (
            self.checkpoint.seconds_between(self._epoch_start, now) if self.checkpoint is not None else 0.0
        )
        return max(1e-9, now - self._epoch_start - saving)

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._steps_done = batch + 1 - self._first_step
        if self.interval_secs <= 0 or not logs:
            return
        now = time.perf_counter()
        if now - self._last_log >= self.interval_secs:
            rate = self._steps_done * self.global_batch / self._working_seconds(now)
            self._print(
                progress_line(
                    self._epoch + 1,
                    self.epochs,
                    batch + 1,
                    self.steps_per_epoch,
                    rate,
                    float(logs.get("loss", float("nan"))),
                    **self._wait(),
                )
            )
            self._last_log = now

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        seconds = self._working_seconds(time.perf_counter())
        steps = self._steps_done or self.steps_per_epoch
        rate = steps * self.global_batch / seconds
        self.epoch_rates.append(rate)
        self.epoch_seconds.append(seconds)
        logs = logs if logs is not None else {}
        self.last_loss = float(logs.get("loss", float("nan")))
        logs["examples_per_sec"] = rate  # TensorBoard (after us in the list) records it too
        extra = {"step_time_ms": f"{1000 * seconds / steps:.2f}"}
        if "accuracy" in logs:
            extra["accuracy"] = f"{float(logs['accuracy']):.4f}"
        extra.update(self._wait())
        self._print(
            progress_line(
                epoch + 1,
                self.epochs,
                self.steps_per_epoch,
                self.steps_per_epoch,
                rate,
                self.last_loss,
                **extra,
            )
        )

    def _wait(self) -> dict[str, Any]:
        if self.meter is None:
            return {}
        saving = self.checkpoint.seconds_between if self.checkpoint is not None else None
        shares = {
            "input_wait_fraction": self.meter.epoch_fraction(),
            "host_overhead_fraction": self.meter.epoch_host_fraction(saving),
        }
        return {name: f"{value:.3f}" for name, value in shares.items() if value is not None}

    @property
    def _epoch(self) -> int:
        return (self.first_epoch or 0) + len(self.epoch_rates)

    def examples_per_sec(self) -> float | None:
        """The median epoch rate, leaving out the first if there are more."""
        rates = self.epoch_rates[1:] if len(self.epoch_rates) > 1 else self.epoch_rates
        return statistics.median(rates) if rates else None


def report_hypertune(metric: str, value: float, step: int) -> bool:
    """Report to Vertex AI hyperparameter tuning when cloudml-hypertune is installed."""
    try:
        import hypertune
    except ImportError:
        return False
    hypertune.HyperTune().report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag=metric, metric_value=value, global_step=step
    )
    return True
