"""Cost before the first dollar (docs/contract.md section 12): the estimate and what a run cost.

- `estimate(spec, book, ...)`: for every attempt of the plan (`plan=`, the caller's, else
  spec/attempts.py's; the Estimate keeps it for cost/compare.py), the hourly list
  price of all its machines and accelerators (replicas x one machine), the worst case (timeout x
  hourly) and, when a throughput is known, the expected hours (epochs x examples per epoch /
  examples per second) and cost.
- The budget the estimate's worst case must stay under: cost/budget.py.
- `job_cost(data, book)`: an ended CustomJob's run time x hourly (an estimate of list price).
- `cost --compare` and its recommendation live in cost/compare.py.

Prices come from a PriceBook (vertex_trainer.pricing): a price it does not hold is None with the
reason, never a guess.
"""

from __future__ import annotations

import json
import math
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vertex_trainer import performance, pricing
from vertex_trainer.cost.scaling_model import Scaling, job_throughput, reducer_price
from vertex_trainer.durations import timestamp_seconds
from vertex_trainer.errors import UserError, VertexTrainerError
from vertex_trainer.regions import region_or_none
from vertex_trainer.spec import HardwareSpec, JobSpec
from vertex_trainer.spec.attempts import PlannedAttempt, attempts
from vertex_trainer.spec.tune import trial_count

DEFAULT_TIMEOUT_S = 7 * 24 * 3600  # Vertex AI's default (and Flex Start's) maximum run time
MULTI_DAY_H = 24.0  # a run this long is "multi-day"
FLEX_START_MAX_H = 7 * 24.0
_STRATEGY = {
    "STANDARD": "standard",
    "SPOT": "spot",
    "FLEX_START": "flex-start",
    "ON_DEMAND": "standard",
    "STRATEGY_UNSPECIFIED": "standard",
}


@dataclass(frozen=True)
class Throughput:
    """Examples per second of the whole job, and where the figure comes from."""

    examples_per_sec: float
    source: str  # "--throughput", "bench FILE", "published reference (...)"
    published: bool = False  # a published reference, not a measurement of this job
    hardware: str | None = None  # the hardware it was measured on (None: the spec's)


@dataclass(frozen=True)
class AttemptCost:
    """One attempt's prices (docs/contract.md section 12's `attempts[]` entry)."""

    attempt: int
    region: str | None
    strategy: str
    hardware: str
    hourly: float | None
    max_hours: float
    max_cost: float | None
    expected_hours: float | None
    expected_cost: float | None
    upper_bound: bool = False
    reason: str | None = None  # why a figure is missing or a ceiling

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "region": self.region,
            "strategy": self.strategy,
            "hardware": self.hardware,
            "hourly": _rate(self.hourly),
            "max_hours": round(self.max_hours, 3),
            "max_cost": _money(self.max_cost),
            "expected_hours": _hours(self.expected_hours),
            "expected_cost": _money(self.expected_cost),
        }


@dataclass(frozen=True)
class Estimate:
    """The plan's prices: `attempts`, the worst case of the plan (`max_cost`, the dearest attempt
    run to its timeout) and the expected cost of attempt 1."""

    currency: str
    prices_as_of: str
    source: str
    attempts: tuple[AttemptCost, ...]
    throughput: Throughput | None = None
    examples_per_epoch: int | None = None
    epochs: int | None = None
    notes: tuple[str, ...] = ()
    scaling: Scaling | None = None  # a multi-machine GPU job's scaling estimate (cost/scaling_model.py)
    plan: tuple[PlannedAttempt, ...] = field(default=(), repr=False)  # the attempts priced, in order
    trials: int | None = None  # the most trials a tuning job runs (the figures are one trial's)

    @property
    def max_cost(self) -> float | None:
        costs = [a.max_cost for a in self.attempts if a.max_cost is not None]
        return max(costs) if costs and len(costs) == len(self.attempts) else None

    @property
    def expected_cost(self) -> float | None:
        return self.attempts[0].expected_cost if self.attempts else None

    @property
    def worst_case(self) -> float | None:
        """The whole job's worst case: a tuning job's `trials` trials, each at `max_cost`."""
        return None if self.max_cost is None else self.max_cost * (self.trials or 1)

    def to_json(self) -> dict[str, Any]:
        """The `cost --output json` object (docs/contract.md section 12), plus "notes"."""
        return {
            "currency": self.currency,
            "prices_as_of": self.prices_as_of,
            "source": self.source,
            "attempts": [a.to_json() for a in self.attempts],
            "max_cost": _money(self.max_cost),
            "expected_cost": _money(self.expected_cost),
            "notes": list(self.notes),
            **({"scaling": self.scaling.to_json()} if self.scaling else {}),
            **({"trials": self.trials, "search_max_cost": _money(self.worst_case)} if self.trials else {}),
        }


def _money(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _rate(value: float | None) -> float | None:
    """An hourly price: to 1/100 of a cent, so hourly x hours matches the costs to the cent."""
    return None if value is None else round(value, 4)


def _hours(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


# -- what the job needs: examples per epoch, throughput -------------------------------------------
# Your own code's epoch is its own (issue 32): the figures `cost` takes for it, by flag.
OWN_EPOCH_FLAGS = "--examples-per-epoch N and --epochs E (default 1)"


@dataclass(frozen=True)
class OwnEpochs:
    """The work of a job running your own code (no trainer: block), as given on the command line:
    examples per epoch (--examples-per-epoch) and epochs (--epochs)."""

    examples_per_epoch: int | None = None
    epochs: int | None = None


def check_own_epochs(spec: JobSpec, given: OwnEpochs, throughput: Throughput | None) -> None:
    """--examples-per-epoch and --epochs describe your own code's work: refused for the bundled
    trainer (its spec says it), and needed with a throughput for your own code (exit 2).

    Raises:
        UserError: the flag to drop or to give."""
    for flag, value in (("--examples-per-epoch", given.examples_per_epoch), ("--epochs", given.epochs)):
        if value is not None and value < 1:
            raise UserError(f"{flag} {value}: must be at least 1")
    if spec.trainer is not None:
        if given.examples_per_epoch is not None or given.epochs is not None:
            raise UserError(
                "--examples-per-epoch and --epochs are for a job running your own code; this spec "
                "runs the bundled trainer, whose trainer: block says its epochs and their size",
                hint="set them in the spec instead: --set trainer.epochs=E --set trainer.train_examples=N",
            )
        return
    if throughput is not None and given.examples_per_epoch is None:
        raise UserError(
            f"{throughput.source} gives examples per second, and this job runs your own code, whose "
            "epoch size vertex-trainer cannot know: the expected hours need it",
            hint=f"give {OWN_EPOCH_FLAGS}; or drop the throughput for the hourly price and the worst case",
        )


def examples_per_epoch(
    spec: JobSpec,
    read_json: Callable[[str], dict[str, Any] | None] | None = None,
    own: OwnEpochs | None = None,
) -> tuple[int | None, str]:
    """How many examples one epoch trains on, and where that figure comes from.

    Args:
        spec: the job.
        read_json: reads a JSON file by path or gs:// URI (None: the manifest is not read).
        own: your own code's figures (a job without trainer:), from the command line.
    Returns:
        (examples or None, the source or the reason): trainer.steps_per_epoch x batch_size, else
        trainer.train_examples, else the `manifest.json` that `data convert` wrote beside the
        training shards; for your own code, --examples-per-epoch."""
    t = spec.trainer
    if t is None:  # script jobs (issue 32): the epoch is the script's own
        if own is not None and own.examples_per_epoch:
            return own.examples_per_epoch, f"--examples-per-epoch {own.examples_per_epoch}"
        return None, f"your own code's epoch size is not known: give {OWN_EPOCH_FLAGS}"
    batch = t.batch_size or 256
    if t.steps_per_epoch:
        return t.steps_per_epoch * batch, f"steps_per_epoch {t.steps_per_epoch} x batch_size {batch}"
    if t.train_examples:
        return t.train_examples, f"trainer.train_examples {t.train_examples}"
    pattern = t.train_data or ""
    manifest = posixpath.join(posixpath.dirname(pattern), "manifest.json") if pattern else ""
    if not manifest or read_json is None:
        return None, "no steps_per_epoch, no train_examples and no manifest.json read"
    try:
        data = read_json(manifest)
    except (OSError, ValueError, VertexTrainerError) as exc:  # no credentials, no bucket: no figure
        return None, f"{manifest} could not be read ({getattr(exc, 'message', exc)})"
    train = ((data or {}).get("splits") or {}).get("train") or {}
    if not train.get("examples"):
        return None, f"no {manifest} (written by `vertex-trainer data convert`) with train examples"
    whole = int(train["examples"]) // batch * batch  # the trainer drops the last partial batch
    return whole, f"{manifest}: {train['examples']} train examples"


def throughput_of(
    spec: JobSpec,
    *,
    examples_per_sec: float | None = None,
    bench: dict[str, Any] | None = None,
    bench_name: str = "the bench result",
) -> Throughput | None:
    """The job's throughput: `--throughput`, a `bench --output json` result, or the published
    reference for its model and accelerator (marked as such), else None.

    Args:
        spec: the job.
        examples_per_sec: a figure given on the command line.
        bench: a bench result (its real-data rate, else the synthetic one).
        bench_name: how to name the bench result (its file).
    Returns:
        A Throughput, or None."""
    if examples_per_sec is not None:
        # (nan and inf pass `<= 0` and made expected_hours NaN: invalid JSON, a 0.00 USD plan)
        if not math.isfinite(examples_per_sec) or examples_per_sec <= 0:
            raise UserError(
                f"--throughput {examples_per_sec}: must be a number more than 0 examples per second",
                hint="e.g. --throughput 1200 (what bench measured), or --bench FILE",
            )
        return Throughput(float(examples_per_sec), "--throughput")
    if bench is not None:
        rate = bench.get("real_examples_per_sec") or bench.get("synthetic_examples_per_sec")
        if (
            isinstance(rate, bool)
            or not isinstance(rate, (int, float))
            or not math.isfinite(rate)
            or rate <= 0
        ):
            raise UserError(
                f"{bench_name} has no real_examples_per_sec or synthetic_examples_per_sec",
                hint="give the JSON that `vertex-trainer bench SPEC --output json` printed",
            )
        which = "real data" if bench.get("real_examples_per_sec") else "synthetic data"
        return Throughput(
            float(rate),
            f"{bench_name} ({which}, on {bench.get('hardware', 'its hardware')})",
            hardware=bench.get("hardware"),
        )
    ref = performance.reference_for(spec)
    accelerator = spec.hardware.accelerator
    if ref is None or accelerator is None:  # a reference is per accelerator: none without one
        return None
    total = ref.examples_per_sec * spec.total_devices
    return Throughput(
        total,
        f"published reference: {ref.examples_per_sec:,.0f} examples/s per "
        f"{accelerator.name} x {spec.total_devices} ({ref.setup}; {ref.source})",
        published=True,
    )


# -- the estimate -------------------------------------------------------------------------------
def _hardware_args(h: HardwareSpec) -> dict[str, Any]:
    return {
        "machine_type": h.machine_type,
        "accelerator_type": h.accelerator_type,
        "accelerator_count": h.accelerator_count,
        "tpu_topology": h.tpu_topology,  # a TPU slice is priced by its chips
    }


def attempt_price(book: pricing.PriceBook, spec: JobSpec, a: PlannedAttempt) -> pricing.Price:
    """The hourly price of all the attempt's machines (the spec's replicas on its hardware), and
    of its Reduction Server reducers (CPU machines, same strategy and region; docs/scaling.md)."""
    one = pricing.machine_price(book, region=a.region, strategy=a.strategy, **_hardware_args(a.hardware))
    workers = one.times(spec.replicas)
    return workers.plus(reducer_price(book, spec, a.region, a.strategy))


def estimate(
    spec: JobSpec,
    book: pricing.PriceBook,
    *,
    throughput: Throughput | None = None,
    read_json: Callable[[str], dict[str, Any] | None] | None = None,
    own: OwnEpochs | None = None,
    plan: tuple[PlannedAttempt, ...] | None = None,
) -> Estimate:
    """The prices of the spec's plan (docs/contract.md section 12).

    Args:
        spec: the job.
        book: the prices (the snapshot, or read from the Billing API).
        throughput: the job's examples per second (None: no expected hours).
        read_json: reads the dataset's manifest.json (None: not read).
        own: a job running your own code: its examples per epoch and epochs (the command line's).
        plan: the attempts, as the caller planned them (a submit: its SubmitPlan's; None: the
            spec's, spec/attempts.py).
    Returns:
        An Estimate: per attempt hourly, max_hours, max_cost, expected_hours, expected_cost."""
    max_hours = (spec.scheduling.timeout or DEFAULT_TIMEOUT_S) / 3600
    # Script jobs (issue 32): the epochs are the command line's (--epochs), else 1.
    epochs = (spec.trainer.epochs if spec.trainer else (own.epochs if own else None)) or 1
    per_epoch, per_epoch_source = examples_per_epoch(spec, read_json, own) if throughput else (None, "")
    notes: list[str] = []
    if not spec.scheduling.timeout:
        notes.append("no scheduling.timeout: the worst case uses Vertex AI's 7-day maximum")
    trials = trial_count(spec)
    if spec.tune is not None:
        fewer = f" (its grid's combinations; max_trials is {spec.tune.max_trials})"
        notes.append(
            f"a tuning job: these are one trial's figures; it runs up to {trials} trials"
            f"{fewer if trials != spec.tune.max_trials else ''}, {spec.tune.parallel_trials} at a time"
        )
    if plan is None:
        plan = attempts(spec)
    if spec.persistent_resource:
        notes.append(
            f"runs on the persistent resource {spec.persistent_resource}: its machines are billed "
            "while the resource exists, not per job"
        )
    if plan[0].reservation:
        notes.append(
            "consumes a reservation: its machines are billed as the reservation (list price "
            "shown), whether or not a job runs"
        )
    scaled = None  # a multi-machine job's scaling estimate (cost/scaling_model.py, docs/scaling.md)
    rate = throughput.examples_per_sec if throughput else 0.0
    if throughput is not None:
        rate, scaled = job_throughput(spec, throughput.examples_per_sec, throughput.published)
    scaled_by = (
        f"; x {scaled.speedup:.2f}/{spec.replicas} for {spec.replicas} machines: the scaling estimate"
        if scaled is not None and throughput is not None and throughput.published
        else ""
    )
    if throughput is None and spec.trainer is None:
        notes.append(f"expected hours: no throughput (give --throughput EX_PER_S and {OWN_EPOCH_FLAGS})")
    elif throughput is None:
        notes.append("expected hours: no throughput (give --throughput EX_PER_S or --bench FILE)")
    elif per_epoch is None and spec.trainer is None:
        notes.append(f"expected hours: {per_epoch_source}")
    elif per_epoch is None:
        notes.append(
            f"expected hours: examples per epoch unknown ({per_epoch_source}); set "
            "trainer.steps_per_epoch or trainer.train_examples"
        )
    else:
        notes.append(
            f"expected hours: {epochs} epochs x {per_epoch:,} examples ({per_epoch_source}) / "
            f"{rate:,.1f} examples/s ({throughput.source}{scaled_by})"
        )
    if scaled is not None:
        notes.append(scaled.describe())
    if spec.scaling and spec.scaling.reduction_server is not None:
        r = reducer_price(book, spec, plan[0].region, plan[0].strategy)
        if r is not None and r.hourly is not None:
            notes.append(f"reducers (Reduction Server): {r.hourly:,.2f} USD/h of each attempt's hourly")
    rows = []
    for a in plan:
        price = attempt_price(book, spec, a)
        # The throughput was measured (or published) for the spec's hardware: another attempt's
        # hardware has no expected hours.
        hours = (
            epochs * per_epoch / rate / 3600
            if throughput and per_epoch and a.hardware == spec.hardware
            else None
        )
        if hours is not None:
            hours = min(hours, max_hours)  # the job stops at its timeout
        hourly = price.hourly
        rows.append(
            AttemptCost(
                a.n,
                a.region,
                a.strategy,
                a.hardware_name,
                hourly,
                max_hours,
                None if hourly is None else hourly * max_hours,
                hours,
                None if hourly is None or hours is None else hourly * hours,
                upper_bound=price.upper_bound,
                reason=price.reason,
            )
        )
        if price.reason and price.reason not in notes:
            notes.append(f"attempt {a.n}: {price.reason}")
        if throughput and per_epoch and a.hardware != spec.hardware:
            notes.append(
                f"attempt {a.n}: no expected hours (the throughput is for "
                f"{spec.hardware.preset or spec.hardware.describe()})"
            )
    return Estimate(
        book.currency,
        book.as_of,
        book.source,
        tuple(rows),
        throughput,
        per_epoch,
        epochs,
        tuple(notes),
        scaled,
        plan,
        trials,
    )


# -- what an ended job cost -----------------------------------------------------------------------
def job_cost(data: dict[str, Any], book: pricing.PriceBook) -> dict[str, Any] | None:
    """What an ended CustomJob cost: its run time (startTime..endTime) x the hourly list price of
    its worker pools, for its strategy in its region. An estimate of list price, not the bill.

    Args:
        data: the CustomJob as the REST API returns it.
        book: the prices.
    Returns:
        {"estimate": true, "usd", "hours", "hourly", "strategy", "prices_as_of", "reason"} ("usd"
        None with the reason when a price is missing), or None for a job that has not run."""
    start, end = data.get("startTime"), data.get("endTime")
    if not start or not end:
        return None
    hours = max(0.0, (timestamp_seconds(end) - timestamp_seconds(start)) / 3600)
    job_spec = data.get("jobSpec") or {}
    strategy = _STRATEGY.get(((job_spec.get("scheduling") or {}).get("strategy") or "STANDARD"), "standard")
    region = region_or_none(data.get("name", ""))
    hourly: float | None = 0.0
    reason: str | None = None
    bound = False
    for pool in job_spec.get("workerPoolSpecs") or ():
        m = (pool or {}).get("machineSpec") or {}
        if not m:
            continue
        acc = m.get("acceleratorType")
        price = pricing.machine_price(
            book,
            machine_type=m.get("machineType", ""),
            accelerator_type=None if acc in (None, "ACCELERATOR_TYPE_UNSPECIFIED") else acc,
            accelerator_count=int(m.get("acceleratorCount") or 0),
            region=region,
            strategy=strategy,
            tpu_topology=m.get("tpuTopology"),
        )
        if price.hourly is None:
            hourly, reason = None, price.reason
            break
        hourly = (hourly or 0.0) + price.hourly * int(pool.get("replicaCount") or 1)
        bound = bound or price.upper_bound
        reason = reason or price.reason
    return {
        "estimate": True,
        "usd": _money(None if hourly is None else hourly * hours),
        "hours": round(hours, 3),
        "hourly": _rate(hourly),
        "strategy": strategy,
        "upper_bound": bound,
        "prices_as_of": book.as_of,
        "reason": reason,
    }


def cost_per_epoch(
    spec: JobSpec,
    book: pricing.PriceBook,
    examples_per_sec: float | None,
    read_json: Callable[[str], dict[str, Any] | None] | None = None,
) -> dict[str, Any] | None:
    """What one epoch costs at a measured throughput, on the spec's hardware, strategy and region
    (`bench` adds it): {"usd", "hours", "examples", "usd_per_million_examples", "hourly", "strategy",
    "region", "prices_as_of"}; "usd" None with "reason" when the epoch's size is unknown."""
    if not examples_per_sec:
        return None
    examples, source = examples_per_epoch(spec, read_json)
    first = attempts(spec)[0]
    price = attempt_price(book, spec, first)
    if price.hourly is None:
        return {"usd": None, "reason": price.reason, "prices_as_of": book.as_of}
    # Per million examples compares hardware in dollars even when the epoch's size is unknown.
    per_million = price.hourly * 1e6 / examples_per_sec / 3600
    out = {
        "usd": None,
        "usd_per_million_examples": round(per_million, 4),
        "hourly": _rate(price.hourly),
        "strategy": first.strategy,
        "region": first.region,
        "upper_bound": price.upper_bound,
        "prices_as_of": book.as_of,
    }
    if examples is None:
        return {**out, "reason": source}
    hours = examples / examples_per_sec / 3600
    return {**out, "usd": _money(hours * price.hourly), "hours": round(hours, 4), "examples": examples}


def load_bench(path: str) -> dict[str, Any]:
    """A `bench --output json` result from a file (exit 2 when it is not one)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise UserError(f"--bench {path}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError):  # (nested past what Python's parser takes: not JSON here)
        raise UserError(
            f"--bench {path}: not JSON", hint="give what `vertex-trainer bench SPEC --output json` printed"
        ) from None
    if not isinstance(data, dict):
        raise UserError(f"--bench {path}: not a bench result object")
    return data
