"""The report's plots (docs/report.md): each one a function drawing a `RunData` on a matplotlib Axes.

matplotlib (the `report` extra) on its Agg backend, imported only here and only when a report is
drawn. `charts(data)` lists the plots the data has figures for, in the page's order; the page
draws each into its own SVG (`svg`), `--format png` all of them into one image (`png`).
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vertex_trainer import lazy
from vertex_trainer.errors import UserError
from vertex_trainer.reporting.run_data import RunData, lr_schedule, time_split

__all__ = ["MARK", "Chart", "charts", "png", "svg"]

TRAIN, EVAL, REF, WAIT = "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"
_SPLIT_COLOURS = ("#9467bd", "#1f77b4", "#8c564b", "#d62728", "#7f7f7f")
_SVG_METADATA = ("Creator", "Date", "Format", "Type")
_OUTCOME = {"SUCCEEDED": "#2ca02c", "FAILED": "#d62728", "CANCELLED": "#7f7f7f"}
# What a PNG this module writes says it is (its Software text), so `report -o` knows its own file.
MARK = "vertex-trainer report"
LABEL_CHARS = 60  # a name in a plot (a metric, a parameter); longer ones end with "..."
MAX_EPOCH_LINES = 100  # the learning-rate plot marks each epoch up to this many
MAX_EPOCH_TICKS = 30  # a curve labels each epoch up to this many; past it, matplotlib's own ticks
MAX_PLOTTED = 2_000  # a curve draws at most this many epochs, evenly kept (the last one too)


@dataclass(frozen=True)
class Chart:
    """One plot: its id on the page (the <figure>'s), its title and how to draw it."""

    id: str
    title: str
    draw: Callable[[Any], None]
    height: float = 2.6  # inches at a width of 6


def _pyplot() -> Any:
    matplotlib = lazy.require("matplotlib", "vertex-trainer report")
    matplotlib.use("Agg", force=True)
    # text.parse_math off: every label is drawn as written, never read as mathtext, so a metric or
    # parameter named "$x_1$" (or holding a lone "$" or "\\") cannot break the drawing
    matplotlib.rcParams.update(
        {"svg.fonttype": "none", "font.size": 9, "axes.titlesize": 10, "text.parse_math": False}
    )
    return lazy.require("matplotlib.pyplot", "vertex-trainer report")


def _label(text: object, limit: int = LABEL_CHARS) -> str:
    """A name from a run's files as a plot shows it: one line, no control characters, at most
    `limit` characters (the page's tables show it whole)."""
    line = "".join(c if c.isprintable() else " " for c in str(text))
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _per_epoch(data: RunData, attr: str) -> tuple[list[int], list[float]]:
    """The epochs that have `attr` and its values: at most MAX_PLOTTED of them, evenly kept, the
    last one too (a log or event files of 200,000 epochs drew for minutes in gigabytes)."""
    pairs = [(e.epoch, getattr(e, attr)) for e in data.epochs if getattr(e, attr) is not None]
    if len(pairs) > MAX_PLOTTED:
        pairs = pairs[-1 :: -math.ceil(len(pairs) / MAX_PLOTTED)][::-1]
    return [p[0] for p in pairs], [float(p[1]) for p in pairs]


def _curve(data: RunData, attr: str, eval_key: str, label: str) -> Callable[[Any], None]:
    def draw(ax: Any) -> None:
        xs, ys = _per_epoch(data, attr)
        if xs:
            ax.plot(xs, ys, "o-", color=TRAIN, label=f"train {label}")
        value = data.metrics.get(eval_key)
        if isinstance(value, int | float):
            end = xs[-1] if xs else int(data.metrics.get("epochs") or 1)
            ax.plot([end], [value], "s", color=EVAL, markersize=8, label=f"eval {label} {value:.4g}")
        ax.set_xlabel("epoch")
        ax.set_ylabel(label)
        if xs and len(xs) <= MAX_EPOCH_TICKS:
            ax.set_xticks(xs)  # an epoch a tick (thousands of labels took minutes)
        else:
            ax.locator_params(axis="x", integer=True)
        ax.legend(loc="best", fontsize=8)
        ax.grid(alpha=0.3)

    return draw


def _lr(data: RunData) -> Callable[[Any], None]:
    schedule = lr_schedule(data.config)

    def draw(ax: Any) -> None:
        ax.plot([s for s, _ in schedule], [lr for _, lr in schedule], "-", color=TRAIN)
        warmup, per_epoch = data.config.get("warmup_steps"), data.config.get("steps_per_epoch")
        if warmup:
            ax.axvline(warmup, color=WAIT, linestyle="--", linewidth=1, label=f"warmup ends (step {warmup})")
            ax.legend(loc="best", fontsize=8)
        per_epoch = int(per_epoch or 0)
        epochs = int(data.config.get("total_steps", 0)) // per_epoch if per_epoch else 0
        if epochs <= MAX_EPOCH_LINES:
            for n in range(1, epochs):
                ax.axvline(n * per_epoch, color="#cccccc", linewidth=0.6)
        ax.set_xlabel("step")
        ax.set_ylabel("learning rate")
        ax.grid(alpha=0.3)

    return draw


def _throughput(data: RunData) -> Callable[[Any], None]:
    def draw(ax: Any) -> None:
        points = [p for p in data.points if p.examples_per_sec is not None]
        if points:
            ax.plot(
                [p.seconds for p in points],
                [p.examples_per_sec for p in points],
                "o-",
                color=TRAIN,
                label="examples/s",
            )
            ax.set_xlabel("seconds since the run started")
        else:
            xs, ys = _per_epoch(data, "examples_per_sec")
            ax.plot(xs, ys, "o-", color=TRAIN, label="examples/s per epoch")
            ax.set_xlabel("epoch")
        steady = data.metrics.get("steady_examples_per_sec")
        if isinstance(steady, int | float):
            ax.axhline(steady, color=TRAIN, linestyle="--", linewidth=1, label=f"steady {steady:,.0f}")
        if data.reference:
            ref = float(data.reference["examples_per_sec"])
            ax.axhline(ref, color=REF, linestyle=":", linewidth=1.5, label=f"published {ref:,.0f}")
        ax.set_ylabel("examples/s")
        ax.set_ylim(bottom=0)
        ax.legend(loc="best", fontsize=8)
        ax.grid(alpha=0.3)

    return draw


def _wait(data: RunData) -> Callable[[Any], None]:
    def draw(ax: Any) -> None:
        points = [p for p in data.points if p.input_wait_fraction is not None]
        if points:
            ax.plot([p.seconds for p in points], [p.input_wait_fraction for p in points], "o-", color=WAIT)
            ax.set_xlabel("seconds since the run started")
        else:
            xs, ys = _per_epoch(data, "input_wait_fraction")
            ax.plot(xs, ys, "o-", color=WAIT)
            ax.set_xlabel("epoch")
        whole = data.metrics.get("input_wait_fraction")
        if isinstance(whole, int | float):
            ax.axhline(whole, color=WAIT, linestyle="--", linewidth=1, label=f"whole run {whole:.0%}")
            ax.legend(loc="best", fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_ylabel("share of time waiting for data")
        ax.grid(alpha=0.3)

    return draw


def _split(split: dict[str, float]) -> Callable[[Any], None]:
    def draw(ax: Any) -> None:
        left = 0.0
        for (name, seconds), colour in zip(split.items(), _SPLIT_COLOURS, strict=False):
            ax.barh([0], [seconds], left=left, color=colour, label=f"{name} {seconds:.1f} s")
            left += seconds
        ax.set_yticks([])
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=3, fontsize=8, frameon=False)

    return draw


def _attempts(data: RunData) -> Callable[[Any], None]:
    def draw(ax: Any) -> None:
        for i, a in enumerate(data.attempts):
            state = str(a.get("state") or "").removeprefix("JOB_STATE_")
            colour = _OUTCOME.get(state, "#bbbbbb") if not a.get("reason") else "#f0b37e"
            ax.barh([0], [1], left=i, color=colour, edgecolor="white")
            outcome = state or "refused"
            if a.get("reason"):
                outcome += f" ({a['reason']})"
            ax.text(
                i + 0.5,
                0,
                "\n".join(
                    _label(line, 30)
                    for line in (
                        f"{a.get('attempt', i + 1)}. {a.get('strategy')}",
                        a.get("region") or "",
                        outcome,
                    )
                ),
                ha="center",
                va="center",
                fontsize=8,
            )
        ax.set_xlim(0, max(1, len(data.attempts)))
        ax.set_xticks(
            [i + 0.5 for i in range(len(data.attempts))],
            [f"attempt {i + 1}" for i in range(len(data.attempts))],
        )
        ax.set_yticks([])

    return draw


def _cost(data: RunData) -> Callable[[Any], None]:
    usd = float((data.cost or {}).get("usd") or 0.0)

    def draw(ax: Any) -> None:
        ax.barh([0], [usd], color=TRAIN, label=f"cost ${usd:,.4g}")
        if data.max_cost:
            ax.axvline(data.max_cost, color=EVAL, linestyle="--", label=f"max_cost ${data.max_cost:,.2f}")
        ax.set_yticks([])
        ax.set_xlabel("USD (list price)")
        ax.set_xlim(0, max(usd, data.max_cost or 0.0) * 1.15 or 1.0)
        ax.legend(loc="best", fontsize=8)

    return draw


def _parameter(data: RunData, name: str) -> Callable[[Any], None]:
    best = data.best_trial()

    def draw(ax: Any) -> None:
        rows = [
            (float(t["parameters"][name]), float(t["metric"]))
            for t in data.trials
            if t.get("metric") is not None and isinstance(t.get("parameters", {}).get(name), int | float)
        ]
        rows.sort()
        ax.plot([r[0] for r in rows], [r[1] for r in rows], "o-", color=TRAIN)
        if best is not None and isinstance(best.get("parameters", {}).get(name), int | float):
            ax.plot(
                [best["parameters"][name]],
                [best["metric"]],
                "*",
                color=EVAL,
                markersize=14,
                label=_label(f"best (trial {best.get('id')})"),
            )
            ax.legend(loc="best", fontsize=8)
        values = [r[0] for r in rows]
        if values and min(values) > 0 and max(values) / min(values) >= 10:
            ax.set_xscale("log")
        ax.set_xlabel(_label(name))
        ax.set_ylabel(_label(data.metric_id))
        ax.grid(alpha=0.3)

    return draw


def parameters(data: RunData) -> list[str]:
    """The numeric parameters of a study's trials, in the order they first appear."""
    names: dict[str, None] = {}
    for t in data.trials:
        for k, v in (t.get("parameters") or {}).items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                names.setdefault(k, None)
    return list(names)


def charts(data: RunData) -> list[Chart]:
    """The plots `data` has figures for, in the page's order."""
    out: list[Chart] = []
    if any(e.loss is not None for e in data.epochs) or "eval_loss" in data.metrics:
        out.append(Chart("loss", "Loss per epoch", _curve(data, "loss", "eval_loss", "loss")))
    if any(e.accuracy is not None for e in data.epochs) or "eval_accuracy" in data.metrics:
        out.append(
            Chart("accuracy", "Accuracy per epoch", _curve(data, "accuracy", "eval_accuracy", "accuracy"))
        )
    if lr_schedule(data.config):
        out.append(Chart("learning-rate", "Learning-rate schedule (warmup, then cosine decay)", _lr(data)))
    if any(p.examples_per_sec is not None for p in data.points) or any(
        e.examples_per_sec for e in data.epochs
    ):
        out.append(Chart("throughput", "Examples per second", _throughput(data)))
    if any(p.input_wait_fraction is not None for p in data.points) or any(
        e.input_wait_fraction is not None for e in data.epochs
    ):
        out.append(Chart("input-wait", "Input wait (share of each epoch so far)", _wait(data)))
    split = time_split(data.metrics, data.elapsed_s)
    if split:
        out.append(Chart("time-split", "Where the wall time went", _split(split), height=1.8))
    if data.attempts:
        out.append(Chart("attempts", "Attempts of the fallback plan", _attempts(data), height=1.6))
    if data.cost and ((data.cost.get("usd") or 0) >= 0.01 or data.max_cost):
        out.append(Chart("cost", "Cost", _cost(data), height=1.3))
    per_parameter = [
        Chart(f"param-{name}", f"{data.metric_id} against {name}", _parameter(data, name))
        for name in parameters(data)
    ]
    # a study's page answers "which trial won, and why" first: its parameters' plots lead
    return per_parameter + out if data.kind == "tuning" else out + per_parameter


def svg(chart: Chart) -> str:
    """One chart as an <svg> element (no XML header), to inline in HTML."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, chart.height))
    try:
        chart.draw(ax)
        fig.tight_layout()
        buf = io.StringIO()
        # no <metadata> (date, creator, format): the same figures give the same page, and nothing
        # but the plot is text in it
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata=dict.fromkeys(_SVG_METADATA))
    finally:
        plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def png(data: RunData, title: str) -> bytes:
    """Every chart of `data` in one PNG (two columns), for a CI artifact or a terminal."""
    plt = _pyplot()
    shown = charts(data)
    if not shown:
        raise UserError(f"report: {title}: nothing to plot (no epochs, metrics, attempts or trials)")
    rows = math.ceil(len(shown) / 2)
    fig, axes = plt.subplots(rows, 2, figsize=(12, 3.0 * rows), squeeze=False)
    try:
        for ax, chart in zip(axes.flat, shown, strict=False):
            chart.draw(ax)
            ax.set_title(_label(chart.title, 2 * LABEL_CHARS))
        for ax in list(axes.flat)[len(shown) :]:
            ax.axis("off")
        fig.suptitle(_label(title, 2 * LABEL_CHARS))
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100, metadata={"Software": MARK})
    finally:
        plt.close(fig)
    return buf.getvalue()
