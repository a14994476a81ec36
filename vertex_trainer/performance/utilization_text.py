"""`status JOB --utilization`: a job's utilization per replica pool and what it means, as text
(the figures and verdicts are vertex/utilization.py's; this only words them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vertex_trainer.vertex.utilization import Figure, Utilization

ROWS = (("accelerator", "accelerator"), ("memory", "accel. memory"), ("cpu", "CPU"))


def _figure(figure: Figure | None) -> str:
    if figure is None:
        return "no series"
    return f"mean {100 * figure.mean:5.1f}%   peak {100 * figure.peak:5.1f}%   ({figure.points} point(s))"


def utilization_lines(use: Utilization) -> list[str]:
    """The figures of each pool, its verdict and fixes, then the notes (where the figures come
    from, what is missing)."""
    lines = [f"utilization of {use.job_id} ({use.start or 'not started'} .. {use.end or 'now'})"]
    for pool, verdict in zip(use.pools, use.verdicts, strict=True):
        lines.append(f"{pool.pool} ({pool.replicas} replica{'s' * (pool.replicas != 1)})")
        for attr, label in ROWS:
            lines.append(f"  {label:14} {_figure(getattr(pool, attr))}")
        lines.append(f"  verdict        {verdict.kind}: {verdict.reason}")
        lines += [f"  fix            {fix}" for fix in verdict.fixes]
    if use.empty:
        lines.append("no figures yet")
    lines += [f"note: {note}" for note in use.notes]
    return lines


def utilization_text(use: Utilization) -> str:
    return "\n".join(utilization_lines(use))
