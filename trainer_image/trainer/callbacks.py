"""Progress/throughput logging and the Vertex hyperparameter-tuning report."""

from __future__ import annotations

import statistics
import sys
import time

from trainer._keras import keras


def progress_line(epoch: int, epochs: int, step: int, steps: int, examples_per_sec: float,
                  loss: float, **extra) -> str:
    """`progress epoch=2/5 step=40/100 examples_per_sec=1234.5 loss=0.42 ...` (parsed by the runner)."""
    text = (f"progress epoch={epoch}/{epochs} step={step}/{steps} "
            f"examples_per_sec={examples_per_sec:.1f} loss={loss:.4f}")
    return text + "".join(f" {k}={v}" for k, v in extra.items())


class Progress(keras.callbacks.Callback):
    """Logs examples/s and step time per epoch (and every `interval_secs` within one).

    Keras calls batch hooks once per execution (every steps_per_execution steps), so the
    timings here cost nothing extra. Throughput excludes the first epoch when there are
    others (it includes tracing and compilation). With a `meter` (trainer.throughput, before
    this callback in fit's list) each line also shows the epoch's measured input wait.
    """

    def __init__(self, *, global_batch: int, steps_per_epoch: int, epochs: int,
                 interval_secs: float = 30.0, backup_dir: str = "", out=None, meter=None):
        super().__init__()
        self.meter = meter
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

    def _print(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def on_epoch_begin(self, epoch, logs=None):
        if self.first_epoch is None:
            self.first_epoch = epoch
            if epoch > 0:
                self._print(f"resumed from backup in {self.backup_dir}: continuing at epoch "
                            f"{epoch + 1}/{self.epochs} ({epoch} epochs done before)")
        self._epoch_start = self._last_log = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        now = time.perf_counter()
        if self.interval_secs > 0 and now - self._last_log >= self.interval_secs and logs:
            step = batch + 1
            rate = step * self.global_batch / (now - self._epoch_start)
            self._print(progress_line(self._epoch + 1, self.epochs, step, self.steps_per_epoch,
                                      rate, float(logs.get("loss", float("nan"))), **self._wait()))
            self._last_log = now

    def on_epoch_end(self, epoch, logs=None):
        seconds = time.perf_counter() - self._epoch_start
        rate = self.steps_per_epoch * self.global_batch / seconds
        self.epoch_rates.append(rate)
        self.epoch_seconds.append(seconds)
        logs = logs if logs is not None else {}
        self.last_loss = float(logs.get("loss", float("nan")))
        logs["examples_per_sec"] = rate  # TensorBoard (after us in the list) records it too
        extra = {"step_time_ms": f"{1000 * seconds / self.steps_per_epoch:.2f}"}
        if "accuracy" in logs:
            extra["accuracy"] = f"{float(logs['accuracy']):.4f}"
        extra.update(self._wait())
        self._print(progress_line(epoch + 1, self.epochs, self.steps_per_epoch,
                                  self.steps_per_epoch, rate, self.last_loss, **extra))

    def _wait(self) -> dict:
        fraction = self.meter.epoch_fraction() if self.meter is not None else None
        return {} if fraction is None else {"input_wait_fraction": f"{fraction:.3f}"}

    @property
    def _epoch(self) -> int:
        return (self.first_epoch or 0) + len(self.epoch_rates)

    def examples_per_sec(self) -> float | None:
        """Steady-state throughput: the median epoch, leaving out the first if there are more."""
        rates = self.epoch_rates[1:] if len(self.epoch_rates) > 1 else self.epoch_rates
        return statistics.median(rates) if rates else None


def report_hypertune(metric: str, value: float, step: int) -> bool:
    """Report to Vertex AI hyperparameter tuning when cloudml-hypertune is installed."""
    try:
        import hypertune  # type: ignore[import-not-found]
    except ImportError:
        return False
    hypertune.HyperTune().report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag=metric, metric_value=value, global_step=step)
    return True
