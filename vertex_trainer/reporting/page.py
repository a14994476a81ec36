"""The report as one self-contained HTML page (or one PNG) from a `RunData` (docs/report.md).

The page is templates/report.html.j2 (jinja2, autoescaped) with every plot inlined as SVG
(reporting/plots.py) and its style inline: no script, no font, no request: it opens
offline. Each figure the page prints from metrics.json carries `data-metric="<key>"`, so a reader
(and tests/report) can find it.
"""

from __future__ import annotations

import errno
import json
import math
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from vertex_trainer.errors import UserError
from vertex_trainer.redact import redact, redact_yaml
from vertex_trainer.reporting import plots as report_plots
from vertex_trainer.reporting.run_data import RunData, time_split
from vertex_trainer.vertex.tensorboards import tensorboard_url

__all__ = ["FORMATS", "check_out", "html", "summary_rows", "write"]

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"
FORMATS = ("html", "png")
# How much of an existing -o file is read for the mark (the page's generator meta, the PNG's
# Software text: both within its first few hundred bytes).
_HEAD_BYTES = 4096

# The figures of metrics.json at the top of the page: (key, label, format).
SUMMARY = (
    ("eval_accuracy", "eval accuracy", "{:.4f}"),
    ("eval_loss", "eval loss", "{:.4f}"),
    ("final_train_accuracy", "final train accuracy", "{:.4f}"),
    ("final_train_loss", "final train loss", "{:.4f}"),
    ("steady_examples_per_sec", "steady examples/s", "{:,.1f}"),
    ("wall_examples_per_sec", "examples/s over all of fit()", "{:,.1f}"),
    ("input_wait_fraction", "input wait", "{:.4f}"),
    ("host_overhead_fraction", "host round trips (between executions)", "{:.4f}"),
    ("train_seconds", "training seconds", "{:.1f}"),
    ("epochs", "epochs", "{}"),
    ("steps", "steps", "{}"),
    ("global_batch_size", "global batch", "{}"),
    ("learning_rate", "peak learning rate", "{:g}"),
    ("model", "model", "{}"),
    ("device", "device", "{}"),
    ("replicas", "replicas", "{}"),
    ("precision", "precision", "{}"),
)


def summary_rows(metrics: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(key, label, text) of each SUMMARY figure metrics.json has."""
    rows = []
    for key, label, fmt in SUMMARY:
        value = metrics.get(key)
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            continue
        rows.append((key, label, fmt.format(value)))
    return rows


def _template() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
    )
    return env.get_template("report.html.j2")


def _trial_rows(data: RunData) -> tuple[list[str], list[dict[str, Any]]]:
    names: dict[str, None] = {}
    for t in data.trials:
        for k in t.get("parameters") or {}:
            names.setdefault(k, None)
    best = data.best_trial()
    rows = [
        {
            "id": t.get("id"),
            "state": str(t.get("state") or "").removeprefix("JOB_STATE_"),
            "values": [(t.get("parameters") or {}).get(k, "") for k in names],
            "metric": "" if t.get("metric") is None else f"{float(t['metric']):.4f}",
            "best": best is not None and t.get("id") == best.get("id"),
        }
        for t in data.trials
    ]
    return list(names), rows


def html(data: RunData, *, now: datetime | None = None) -> str:
    """The page, as text.

    Args:
        data: what the report shows.
        now: the time stamped on the page (default: now, UTC).
    Returns:
        one HTML document, every plot and style inline.
    """
    from markupsafe import Markup

    # Shown, never sent: secret-looking env values and flags as *** (vertex_trainer/redact.py),
    # also in a record written before they were masked, or a cloud job's CustomJob as Vertex AI
    # holds it.
    data = data.with_(
        spec_yaml=redact_yaml(data.spec_yaml) if data.spec_yaml else data.spec_yaml,
        custom_job=redact(data.custom_job),
    )
    figures = [
        {"id": c.id, "title": c.title, "svg": Markup(report_plots.svg(c))} for c in report_plots.charts(data)
    ]
    params, trials = _trial_rows(data)
    cost = data.cost or {}
    return str(
        _template().render(
            data=data,
            title=f"{data.name}: run report",
            stamp=f"{(now or datetime.now(timezone.utc)):%Y-%m-%d %H:%M:%S} UTC",
            summary=summary_rows(data.metrics),
            figures=figures,
            split=time_split(data.metrics, data.elapsed_s),
            params=params,
            trials=trials,
            best=data.best_trial(),
            cost=cost,
            state=(data.state or "").removeprefix("JOB_STATE_"),
            custom_job=json.dumps(data.custom_job, indent=2) if data.custom_job else None,
            tensorboard_url=_tensorboard_url(data.custom_job),
        )
    )


def _tensorboard_url(job: dict[str, Any] | None) -> str | None:
    """A Vertex AI job's page in its TensorBoard instance (jobSpec.tensorboard), or None (a local
    run, a job without one)."""
    if not job:
        return None
    return tensorboard_url((job.get("jobSpec") or {}).get("tensorboard"), str(job.get("name") or ""))


def check_out(out: str) -> None:
    """Refuse (UserError, exit 2) an `out` that would replace what is not a report: a folder, or
    a file that neither page nor PNG of this module wrote (a run's metrics.json, a spec, notes),
    which writing the report would have destroyed. A report written before is replaced."""
    path = Path(out).expanduser()
    if path.is_symlink():
        raise _linked(out, path)
    if path.is_dir():
        raise UserError(
            f"report: -o {out} is a folder, not a file",
            hint=f"give -o a file name, e.g. -o {Path(out) / 'report.html'}",
        )
    if not path.exists():
        return
    try:
        with path.open("rb") as f:
            head = f.read(_HEAD_BYTES) if path.is_file() else b""
    except OSError:
        head = b""
    if report_plots.MARK.encode() not in head:
        raise UserError(
            f"report: -o {out} is a file that no report wrote: writing the report would replace it",
            hint="give -o a new file name (e.g. report.html), or remove that file first if it may go",
        )


def write(data: RunData, out: str, fmt: str = "html") -> str:
    """Write the report of `data` to `out` as `fmt` ("html" or "png"); the path written.
    Refused (check_out) when `out` holds something that is not a report."""
    check_out(out)
    path = Path(out).expanduser()
    content = (
        report_plots.png(data, f"{data.name}: run report")
        if fmt == "png"
        else html(data).encode("utf-8", "replace")
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # never through a link (one made since check_out too): the file itself, or ELOOP
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
        with os.fdopen(fd, "wb") as f:
            f.write(content)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _linked(out, path) from None
        raise UserError(
            f"report: cannot write {path}: {e.strerror or e}", hint="give -o a file in a folder you can write"
        ) from None
    return str(path)


def _linked(out: str, path: Path) -> UserError:
    """-o names a symbolic link: the page would be written where it points (a link someone else
    planted in a shared folder, to a file of yours that does not exist yet: ~/.ssh/authorized_keys)."""
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return UserError(
        f"report: -o {out} is a symbolic link (to {target}): the report would be written there",
        hint="give -o a new file name, or remove the link first if it is yours",
    )
