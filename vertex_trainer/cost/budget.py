"""The budget a plan must stay under: `scheduling.max_cost` or `--max-cost` against the plan's
worst case (a tuning job's: its whole search), refused with exit 2 before anything is sent."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vertex_trainer.errors import UserError

if TYPE_CHECKING:
    from vertex_trainer.cost.estimate import Estimate
    from vertex_trainer.spec import JobSpec


def enforce_budget(
    spec: JobSpec, est: Estimate, *, max_cost: float | None = None
) -> tuple[float | None, str | None]:
    """Refuse (exit 2, before anything is built or sent) a plan whose worst case exceeds the
    budget: `max_cost` (submit --max-cost) or else the spec's scheduling.max_cost. A tuning job's
    worst case is its whole search's (check_search_budget).

    Args:
        spec: the job.
        est: its estimate (estimate()).
        max_cost: a budget given on the command line (wins over the spec's).
    Returns:
        the budget the plan passed and where it was given ("--max-cost", "scheduling.max_cost"),
        or (None, None) when no budget is set.
    Raises:
        UserError naming both figures."""
    budget = max_cost if max_cost is not None else spec.scheduling.max_cost
    if budget is None:
        return None, None
    field = "--max-cost" if max_cost is not None else "scheduling.max_cost"
    if spec.tune is not None:  # up to max_trials trials (a grid: its combinations), each to its timeout
        check_search_budget(est, float(budget), field, est.trials or spec.tune.max_trials)
    else:
        check_budget(est, float(budget), field)
    return float(budget), field


def check_budget(est: Estimate, budget: float, field: str) -> None:
    """Refuse (exit 2, nothing sent) a plan whose worst case exceeds `budget` USD.

    Args:
        est: the plan's estimate.
        budget: the most the job may cost, USD.
        field: where the budget was given ("scheduling.max_cost", "--max-cost").
    Raises:
        UserError naming the attempt, its hourly price, its timeout and both figures."""
    for a in est.attempts:
        if a.max_cost is None:
            raise UserError(
                f"{field}: {budget:,.2f} USD cannot be checked: attempt {a.attempt} "
                f"({a.strategy}, {a.region}, {a.hardware}) has no price: {a.reason}",
                hint=f"remove {field}, or pick hardware and a region the price snapshot "
                "covers (vertex-trainer cost SPEC shows them)",
            )
        if a.max_cost > budget + 1e-9 and a.hourly is not None:  # max_cost is hourly x timeout
            bound = " at most" if a.upper_bound else ""
            raise UserError(
                f"{field}: the worst case of attempt {a.attempt} ({a.strategy}, {a.region}, {a.hardware}) is "
                f"{a.max_cost:,.2f} USD ({a.hourly:,.2f} USD/h{bound} x {a.max_hours:g} h timeout), over the "
                f"budget of {budget:,.2f} USD; nothing was sent",
                hint=f"shorten scheduling.timeout to at most {budget / a.hourly:,.1f} h, raise {field}, or "
                "choose cheaper hardware or strategy (vertex-trainer cost SPEC --compare)",
            )


def check_search_budget(est: Estimate, budget: float, field: str, trials: int) -> None:
    """Refuse (exit 2, nothing sent) a tuning job whose whole search may cost more than `budget`
    USD: up to `trials` trials run, each of which may run to its timeout, so the search's worst
    case is `trials` x one trial's (the dearest attempt's).

    Args:
        est: one trial's estimate (estimate() of the tuning spec).
        budget: the most the search may cost, USD.
        field: where the budget was given ("scheduling.max_cost", "--max-cost").
        trials: the most trials the search runs (tune.max_trials; a grid's combinations when fewer).
    Raises:
        UserError naming the search's worst case, the trials, one trial's figures and the budget."""
    for a in est.attempts:
        if a.max_cost is None or a.hourly is None:
            check_budget(est, budget, field)  # the same "cannot be checked" refusal
            continue
        total = a.max_cost * trials
        if total > budget + 1e-9:
            bound = " at most" if a.upper_bound else ""
            fewer = int(budget // a.max_cost) if a.max_cost else 0
            raise UserError(
                f"{field}: the worst case of the whole search is {total:,.2f} USD ({trials} trials x "
                f"{a.max_cost:,.2f} USD, one trial's worst case: attempt {a.attempt} ({a.strategy}, "
                f"{a.region}, {a.hardware}) {a.hourly:,.2f} USD/h{bound} x {a.max_hours:g} h timeout), "
                f"over the budget of {budget:,.2f} USD; nothing was sent",
                hint=(f"lower tune.max_trials to at most {fewer}, " if fewer else "")
                + f"shorten scheduling.timeout to at most {budget / trials / a.hourly:,.2f} h, raise "
                f"{field}, or choose cheaper hardware or strategy (vertex-trainer cost SPEC --compare)",
            )
