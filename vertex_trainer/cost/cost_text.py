"""Costs for people (docs/contract.md section 12): the estimate of `vertex-trainer cost`, the one
price line of `validate` and `submit --dry-run`, what an ended job cost, and `cost --compare`'s
table. The figures are cost.estimate's and cost.compare's; only the words are here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.cost.compare import Comparison
    from vertex_trainer.cost.estimate import Estimate

__all__ = ["compare_text", "cost_text", "estimate_text", "job_cost_line", "price_line"]


def price_line(est: Estimate) -> str:
    """The one line `validate` and `submit --dry-run` print: hourly and worst case per attempt."""
    parts = []
    for a in est.attempts:
        if a.hourly is None:
            parts.append(f"attempt {a.attempt} {a.strategy}: no price ({a.reason})")
            continue
        le = "<= " if a.upper_bound else ""
        worst = "-" if a.max_cost is None else f"{a.max_cost:,.2f}"
        parts.append(
            f"attempt {a.attempt} {a.strategy} {a.region}: {le}{a.hourly:,.2f} USD/h, worst case "
            f"{le}{worst} USD ({a.max_hours:g} h)"
        )
    return f"price: {'; '.join(parts)} (list prices as of {est.prices_as_of}, `vertex-trainer cost` for more)"


def estimate_text(est: Estimate) -> str:
    """`vertex-trainer cost` for people: a line per attempt, the plan's worst case and expected
    cost, then the notes."""
    lines = [f"prices   {est.currency}, list prices as of {est.prices_as_of} ({est.source})"]
    for a in est.attempts:
        le = "<=" if a.upper_bound else ""
        hourly = "-" if a.hourly is None else f"{le}{a.hourly:,.2f}/h"
        worst = "-" if a.max_cost is None else f"{le}{a.max_cost:,.2f}"
        expected = (
            "-"
            if a.expected_cost is None or a.expected_hours is None
            else f"{le}{a.expected_cost:,.2f} ({a.expected_hours:,.1f} h)"
        )
        lines.append(
            f"attempt {a.attempt}  {a.strategy:<10} {a.region or '-':<16} {a.hardware:<12} "
            f"hourly {hourly:<12} worst case {worst} ({a.max_hours:g} h)  expected {expected}"
        )
    le = "at most " if any(a.upper_bound for a in est.attempts) else ""
    worst = "-" if est.max_cost is None else f"{le}{est.max_cost:,.2f} {est.currency}"
    expected = "-" if est.expected_cost is None else f"{le}{est.expected_cost:,.2f} {est.currency}"
    lines.append(f"plan     worst case {worst}; expected {expected}")
    if est.trials is not None:  # a tuning job: the lines above are one trial's
        whole = "-" if est.worst_case is None else f"{le}{est.worst_case:,.2f} {est.currency}"
        lines.append(f"search   up to {est.trials} trials: worst case {whole} ({est.trials} x one trial's)")
    lines += [f"note     {n}" for n in est.notes]
    return "\n".join(lines)


def job_cost_line(cost: dict[str, Any] | None) -> str | None:
    """The `status` line of what an ended job cost (api.job_cost's object), e.g. "cost     ~123.45
    USD (estimate: 2.50 h x 49.38 USD/h spot list price, as of ...; not the bill)"; None when the
    job has not run."""
    if not cost:
        return None
    if cost["usd"] is None:
        return f"cost     unknown ({cost['reason']})"
    le = "at most " if cost.get("upper_bound") else "~"
    hours = cost["hours"]
    ran = f"{hours * 60:,.1f} min" if hours < 0.1 else f"{hours:,.2f} h"
    return (
        f"cost     {le}{cost['usd']:,.2f} USD (estimate: {ran} x {cost['hourly']:,.2f} "
        f"USD/h {cost['strategy']} list price, as of {cost['prices_as_of']}; not the bill)"
    )


def cost_text(result: Estimate | Comparison) -> str:
    """What `vertex-trainer cost` prints for api.cost's answer: the estimate, and with --compare
    the alternatives and the recommendation below it."""
    # (cost.compare loads the spec's pydantic models; `status` and the plan's text import this module)
    from vertex_trainer.cost.compare import Comparison

    if isinstance(result, Comparison):
        return f"{estimate_text(result.estimate)}\n{compare_text(result)}"
    return estimate_text(result)


def _cell(value: float | int | None, fmt: str, bound: str = "") -> str:
    return "-" if value is None else bound + fmt.format(value)


def compare_text(c: Comparison, limit: int = 40) -> str:
    """`cost --compare` for people: the alternatives' table (the spec's own choice starred, at most
    `limit` rows), then the recommendation with its reason."""
    lines = [
        f"alternatives (list prices as of {c.estimate.prices_as_of}; expected from "
        f"{'the throughput' if c.facts.hours_known else 'no throughput: worst case only'}):",
        f"  {'hardware':<13}{'strategy':<11}{'region':<17}{'hourly USD':>12}{'exp. hours':>11}"
        f"{'exp. cost':>11}{'worst case':>12}  quota",
    ]
    for r in c.rows[:limit]:
        le = "<=" if r.upper_bound else ""
        lines.append(
            f"{'*' if r.current else ' '} {r.hardware:<13}{r.strategy:<11}{r.region:<17}"
            f"{_cell(r.hourly, '{:,.2f}', le):>12}{_cell(r.expected_hours, '{:,.1f}'):>11}"
            f"{_cell(r.expected_cost, '{:,.0f}', le):>11}{_cell(r.max_cost, '{:,.0f}', le):>12}"
            f"  {_cell(r.quota, '{}')}"
        )
    if len(c.rows) > limit:
        lines.append(f"  ... {len(c.rows) - limit} more (--output json lists them all)")
    m = c.machines
    if m is not None:  # issue 35: N machines beside one, an estimate (docs/scaling.md)
        lines.append(
            f"machines (estimate, scaling efficiency {m.efficiency:.0%}, {m.speedup:.2f}x as fast as 1):"
        )
        for n, hourly, hours, cost in (
            (m.machines, m.hourly, m.hours, m.cost),
            (1, m.one_hourly, m.one_hours, m.one_cost),
        ):
            lines.append(
                f"  {n} x {m.hardware:<13}hourly {_cell(hourly, '{:,.2f}'):>10}  exp. hours "
                f"{_cell(hours, '{:,.1f}'):>8}  exp. cost {_cell(cost, '{:,.0f}'):>8}"
            )
        lines.append(f"  {m.verdict()}")
    rec = c.recommendation
    lines.append(f"recommendation: {rec.strategy} ({rec.hardware}, {rec.region}): {rec.reason}")
    return "\n".join(lines)
