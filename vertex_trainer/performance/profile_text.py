"""`vertex-trainer profile` for people: the profiled steps' breakdown, the top ops, the verdict.
The figures are performance/step_profile.py's `Profile`; nothing is computed here.

The names come from the trace, a file whoever writes the run's folder or bucket wrote (its path,
its hosts' file names, the steps', ops' and hardware's names in it): each is shown with the
characters that are not printable escaped (redact.shown_name), never sent to the terminal."""

from __future__ import annotations

from typing import Any

from vertex_trainer.redact import shown_name, terminal_safe

__all__ = ["profile_text"]

OP_NAME = 60  # characters of an op's name shown


def _ms(value: float) -> str:
    return f"{value:.3f} ms" if value < 10 else f"{value:,.1f} ms"


def profile_text(p: Any) -> str:
    """The text of a performance.step_profile.Profile: where the trace is, the steps, where their time
    goes (share and ms a step, largest first), the top ops by self time and the verdict."""
    hosts = [shown_name(h) for h in p.trace.hosts]
    lines = [
        f"trace    {shown_name(p.trace.folder)} ({len(hosts)} host{'s' if len(hosts) != 1 else ''}: "
        + ", ".join(hosts)
        + (f"; {shown_name(p.hardware)}" if p.hardware else "")
        + ")",
    ]
    if p.steps:
        spe = f", steps_per_execution {p.steps_per_execution}" if p.steps_per_execution else ""
        first, last = shown_name(p.step_names[0]), shown_name(p.step_names[-1])
        span = first if p.steps == 1 else f"{first} .. {last}"
        lines.append(f"steps    {p.steps} profiled ({span}), {_ms(p.step_time_ms or 0)} a step{spe}")
        lines += ["", "where the step time goes:"]
        width = max(len(c.label) for c in p.breakdown)
        for c in sorted(p.breakdown, key=lambda c: c.fraction, reverse=True):
            lines.append(f"  {c.label:<{width}}  {100 * c.fraction:5.1f}%  {_ms(c.ms_per_step)} a step")
    for note in p.notes:
        lines.append(f"note: {terminal_safe(note)}")
    if p.top_ops:
        where = shown_name(p.top_ops[0].where.lower()) or "host"
        lines += ["", f"top ops by self time ({where}):"]
        for n, op in enumerate(p.top_ops, start=1):
            name = op.name if len(op.name) <= OP_NAME else op.name[: OP_NAME - 3] + "..."
            share = f"{100 * op.fraction:5.1f}%"
            lines.append(
                f"  {n:2}. {share}  {_ms(op.self_ms):>10}  x{op.occurrences:<5} "
                f"{shown_name(name)} ({shown_name(op.type)})"
            )
    lines += ["", f"verdict: {p.verdict}" if p.verdict else "verdict: none (no step in the trace)"]
    return "\n".join(lines)
