"""What a local run shows: prefixed replica lines, a live progress line, and the summary.

Everything goes to a rich console on stderr by default: stdout belongs to the caller (its text
summary, or exactly one JSON object with `--output json`). On a terminal with `live` on, the
chief's latest `progress ...` line is shown as a status line and per-step progress lines are
folded into it (each epoch's last one is kept in the log); elsewhere every line is printed as is.
"""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING, Any

from vertex_trainer.contract import SUCCEEDED, short_state
from vertex_trainer.local.failure import exception_line

if TYPE_CHECKING:
    from rich.console import Console

# `progress epoch=2/5 step=40/100 examples_per_sec=1234.5 loss=0.42` (the trainer's contract).
_PROGRESS = re.compile(r"^progress\s+(?P<kv>(?:\S+=\S+\s*)+)$")
_COLORS = ("cyan", "magenta", "green", "yellow", "blue", "red")
SUMMARY_METRICS = (
    "replicas",
    "epochs",
    "steps",
    "global_batch_size",
    "train_examples_per_sec",
    "final_train_loss",
    "eval_accuracy",
)
CHIEF = "workerpool0-0"


def parse_progress(line: str) -> dict[str, str] | None:
    """The key=value pairs of a trainer `progress ...` line; None for any other line."""
    m = _PROGRESS.match(line.strip())
    if not m:
        return None
    return dict(kv.split("=", 1) for kv in m.group("kv").split())


def default_console() -> Console:
    """A rich console on stderr (replica logs, progress and the summary are diagnostics)."""
    from rich.console import Console

    return Console(stderr=True, highlight=False)


# TensorFlow's C++ start-up banner: absl writes it before TF_CPP_MIN_LOG_LEVEL can apply, so the
# variable cannot hide it. Not shown in the terminal (the run's log files keep every line).
_TF_BANNER = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|[IW]\d{4} [\d:. ]+\d+ (port|cpu_feature_guard|cuda_\w+|gpu_\w+)\.cc:\d+\] "
    r"|To enable the following instructions: .* rebuild TensorFlow)"
)


def is_banner(line: str) -> bool:
    """A line of TensorFlow's start-up banner (not the run's own output)."""
    return bool(_TF_BANNER.match(line))


class StatusLine:
    """Mixin for a view used with `with`: a rich status line (a spinner) while it is entered.

    The view sets `console` and defines `_opening_status()`, the first text (None: no status
    line, e.g. not a terminal); `_status` is the live status, None when there is none."""

    console: Any
    _status: Any = None

    def _opening_status(self) -> str | None:
        raise NotImplementedError

    def __enter__(self) -> StatusLine:
        text = self._opening_status()
        if text is not None:
            self._status = self.console.status(text, spinner="dots")
            self._status.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._status is not None:
            self._status.__exit__(*exc)
            self._status = None


class Display(StatusLine):
    """Prefixed log lines; a live progress line on a terminal, plain lines elsewhere."""

    def __init__(self, console: Console, names: list[str], live: bool) -> None:
        from rich.text import Text

        self._Text = Text
        self.console = console
        self.width = max((len(n) for n in names), default=0)
        self.colors = {n: _COLORS[i % len(_COLORS)] for i, n in enumerate(names)}
        self.live = live and console.is_terminal
        self.progress: dict[str, dict[str, str]] = {}
        self.started = time.monotonic()
        self._status = None
        # The replica whose lines were printed last, and how many of its lines in a row: a
        # failing replica's last lines already on screen just above the summary are not repeated.
        self._last: str | None = None
        self._run = 0

    def _opening_status(self) -> str | None:
        return self._status_text() if self.live else None

    def _status_text(self) -> str:
        elapsed = time.monotonic() - self.started
        p = self.progress.get(CHIEF) or next(iter(self.progress.values()), None)
        if not p:
            return f"starting {len(self.colors)} replica(s)... {elapsed:,.0f}s"
        parts = [f"epoch {p.get('epoch', '?')}", f"step {p.get('step', '?')}"]
        if "examples_per_sec" in p:
            parts.append(f"{p['examples_per_sec']} examples/s")
        if "loss" in p:
            parts.append(f"loss {p['loss']}")
        return "training: " + "  ".join(parts) + f"  ({elapsed:,.0f}s)"

    def tick(self) -> None:
        """Refresh the live line (its elapsed time) while nothing is printed."""
        if self._status is not None:
            self._status.update(self._status_text())

    def lines(self, items: list[tuple[str, str]]) -> None:
        for name, line in items:
            self.line(name, line)

    def line(self, name: str, line: str) -> None:
        if is_banner(line):
            return
        prog = parse_progress(line)
        if prog is not None:
            self.progress[name] = prog
            if self._status is not None:
                self.tick()
                # On a terminal the live line replaces per-step lines; keep each epoch's last.
                current, _, total = prog.get("step", "").partition("/")
                if not (total and current == total):
                    return
        self._run = self._run + 1 if name == self._last else 1
        self._last = name
        text = self._Text()
        text.append(f"{name:<{self.width}} | ", style=self.colors.get(name, ""))
        text.append(line)
        self.console.print(text, soft_wrap=True, highlight=False, markup=False)

    def note(self, message: str, style: str = "bold") -> None:
        self.console.print(self._Text(message, style=style), soft_wrap=True)

    def summary(self, result: Any) -> None:
        """State, time, the failing replica's last lines, or model, output and main metrics.

        `result` is a `LocalResult` (vertex_trainer.local.run)."""
        mins, secs = divmod(result.elapsed_s, 60)
        took = f"{int(mins)}m{secs:04.1f}s" if mins else f"{secs:.1f}s"
        style = {SUCCEEDED: "bold green", "JOB_STATE_FAILED": "bold red"}.get(result.state, "bold yellow")
        self.note(f"{short_state(result.state)} in {took}  ({result.name}, {result.job_id})", style=style)
        if result.failed_replica is not None:
            raised = exception_line(result.log_tail)
            said = f"{result.failed_replica} exited with code {result.failed_exit_code}" + (
                f": {raised}" if raised else ""
            )
            kept = [line for line in result.log_tail if not line.startswith("... (")]
            if result.failed_replica == self._last and self._run >= len(kept):
                self.note(f"{said} (its last lines are just above)", style="red")
            else:
                self.note(f"{said}; its last lines:", style="red")
                for line in result.log_tail:
                    self.console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
        if result.state != SUCCEEDED:
            return
        if result.model_written is False:
            self.note(
                f"model:   none: nothing was written to AIP_MODEL_DIR ({result.model_dir})", style="yellow"
            )
        else:
            self.note(f"model:   {result.model_dir}", style="")
        self.note(f"output:  {result.output_dir}", style="")
        if result.metrics:
            shown = {k: result.metrics[k] for k in SUMMARY_METRICS if k in result.metrics}
            self.note("metrics: " + json.dumps(shown), style="")
        else:
            self.note("metrics: none (no metrics.json in the output directory)", style="yellow")
