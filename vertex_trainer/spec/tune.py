"""The `tune:` block (docs/contract.md section 10): hyperparameter tuning over the trainer's own
flags, or over the arguments of your own code (a job without `trainer:`, docs/tuning.md).

The models check their own fields (a range or a list of values, min < max, a log scale above 0,
parallel <= max trials); `tune_rules(spec)` checks what spans the spec, run with the other
cross-field rules in rules.py: each parameter names a `trainer:` field, and every value a trial
can get is one that field accepts (validated by `TrainerArgs` itself, so the trainer's types,
bounds and choices apply); the metric is the one the trainer reports.

A parameter's kind (the StudySpec parameter type) follows from its shape and its trainer field:
min/max on an integer field is an integer range, on a float field a double range; numbers in
`values` are discrete, text or booleans categorical. `type:` says it explicitly.

A job without `trainer:` (a script job, or an image of your own given `args:`) tunes its own
arguments: each key is the argument's name as the code spells it (`learning_rate` ->
`--learning_rate=VALUE`, the StudySpec parameter id verbatim); a range of whole numbers is an
integer range, else a double one; the metric is whatever tag the code reports. `own_args(spec)`
tells the two apart, `parameter_id(spec, name)` spells the id, `tune_rules` checks both.
"""

from __future__ import annotations

import builtins
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import Field, ValidationError, field_validator, model_validator

from trainer.flags import BY_NAME
from vertex_trainer import hardware as hw
from vertex_trainer.contract import MAX_USER_LABELS
from vertex_trainer.errors import SpecError, SpecProblems
from vertex_trainer.spec.base import Strict, problem
from vertex_trainer.spec.factory import trainer_of
from vertex_trainer.spec.trainer import SPEC_FLAGS, TrainerArgs
from vertex_trainer.suggest import suggest

if TYPE_CHECKING:  # model.py imports this module (directly or through the rules): named for the type checker
    from vertex_trainer.spec.model import JobSpec

Kind = Literal["double", "integer", "discrete", "categorical"]
Scale = Literal["linear", "log", "reverse_log"]
KINDS: tuple[str, ...] = get_args(Kind)
SCALES: tuple[str, ...] = get_args(Scale)
# The trainer reports its eval accuracy under this tag unless trainer.hypertune_metric says otherwise.
DEFAULT_METRIC = BY_NAME["hypertune_metric"].default
# Flags a study must not vary: the tag the metric is reported under.
_NOT_TUNABLE = ("hypertune_metric",)
MAX_VALUES = 1000  # StudySpec: a discrete parameter has at most 1,000 values

Value = bool | int | float | str
_EXPONENT = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


class TuneParameter(Strict):
    """One tuned `trainer:` field: a range (min, max) or a list of values."""

    min: int | float | None = Field(None, description="lowest value of a range (inclusive)")
    max: int | float | None = Field(None, description="highest value of a range (inclusive)")
    values: tuple[Value, ...] | None = Field(
        None,
        min_length=1,
        max_length=MAX_VALUES,
        description="the values to try: numbers (discrete) or text/booleans (categorical)",
    )
    scale: Scale | None = Field(
        None,
        description="how the search spreads a numeric parameter: linear (default), log or "
        "reverse_log (both need values > 0)",
    )
    type: Kind | None = Field(
        None,
        description="double | integer (ranges), discrete | categorical (values); default: "
        "from the trainer field and the values",
    )

    @field_validator("values", mode="before")
    @classmethod
    def _exponents_are_numbers(cls, v: Any) -> Any:
        # YAML 1.1 (PyYAML) reads 1e-3 as text; a value in exponent notation is a number here.
        if isinstance(v, (list, tuple)):
            return [float(x) if isinstance(x, str) and _EXPONENT.match(x) else x for x in v]
        return v

    @model_validator(mode="after")
    def _own_fields(self) -> TuneParameter:
        ranged = self.min is not None or self.max is not None
        if ranged and self.values is not None:
            raise problem(
                "give either min and max (a range) or values (a list), not both",
                hint="e.g. {min: 0.01, max: 1.0, scale: log} or {values: [256, 512]}",
            )
        if self.values is None:
            if self.min is None or self.max is None:
                missing = "min" if self.min is None else "max"
                raise problem(
                    f"a range needs both min and max ({missing} is missing)",
                    sub=missing,
                    hint="e.g. {min: 0.01, max: 1.0}, or values: [...] for a list",
                )
            return self._range(self.min, self.max)
        return self._values(self.values)

    def _range(self, lo: float, hi: float) -> TuneParameter:
        if self.type in ("discrete", "categorical"):
            raise problem(
                f"type {self.type} takes values: [...], not min/max",
                sub="type",
                hint="use type: double or integer for a range, or list the values",
            )
        if lo >= hi:
            raise problem(
                f"min {lo:g} is not less than max {hi:g}",
                sub="min",
                hint=(
                    f"swap them (min: {hi:g}, max: {lo:g}), or list one value in trainer: instead"
                    if lo > hi
                    else f"widen the range (min below max), or set {lo:g} in trainer: instead of tuning it"
                ),
            )
        if self.type == "integer":
            for end in ("min", "max"):
                value = getattr(self, end)
                if not float(value).is_integer():
                    raise problem(
                        f"an integer range needs whole numbers ({end} is {value:g})",
                        sub=end,
                        hint=f"e.g. {end}: {math.floor(value) if end == 'min' else math.ceil(value)}",
                    )
        if self.scale in ("log", "reverse_log") and lo <= 0:
            raise problem(
                f"a {self.scale} scale needs min > 0 (min is {lo:g})",
                sub="min",
                hint="raise min above 0 (e.g. 1e-4), or use scale: linear",
            )
        return self

    def _values(self, values: tuple[Value, ...]) -> TuneParameter:
        if self.type in ("double", "integer"):
            raise problem(
                f"type {self.type} takes min and max, not values",
                sub="type",
                hint="use type: discrete (numbers) or categorical (text), or give min/max",
            )
        text = [v for v in values if isinstance(v, (str, bool))]
        if self.type == "discrete" and text:
            raise problem(
                f"discrete values must be numbers (got {text[0]!r})",
                sub="values",
                hint="use type: categorical for text values",
            )
        seen: list[str] = []
        for i, value in enumerate(values):
            key = category(value) if self.categorical else repr(float(value))
            if key in seen:
                raise problem(f"{value!r} is listed twice", sub=f"values[{i}]", hint="list each value once")
            seen.append(key)
        if self.categorical and self.scale:
            raise problem(
                "a scale applies to numbers only, not to categorical values", sub="scale", hint="remove scale"
            )
        # Categorical values with a scale were refused above: these are the numbers.
        numbers = [v for v in values if not isinstance(v, (str, bool))]
        if self.scale in ("log", "reverse_log") and min(numbers) <= 0:
            raise problem(
                f"a {self.scale} scale needs values > 0 (got {min(numbers):g})",
                sub="scale",
                hint="use scale: linear, or only positive values",
            )
        return self

    @property
    def bounds(self) -> tuple[int | float, int | float]:
        """(min, max) of a range; ValueError for a parameter that lists values."""
        if self.min is None or self.max is None:
            raise ValueError("a parameter with values: [...] has no range")
        return self.min, self.max

    @property
    def listed(self) -> tuple[Value, ...]:
        """The values of a parameter that lists them; ValueError for a range."""
        if self.values is None:
            raise ValueError("a range parameter lists no values")
        return self.values

    @property
    def categorical(self) -> bool:
        """True for values that are text or booleans (or `type: categorical`)."""
        return self.values is not None and (
            self.type == "categorical"
            or (self.type is None and any(isinstance(v, (str, bool)) for v in self.values))
        )

    def kind(self, field_type: builtins.type) -> str:
        """double | integer | discrete | categorical, given the trainer field's Python type."""
        if self.type:
            return self.type
        if self.values is not None:
            return "categorical" if self.categorical else "discrete"
        return "integer" if field_type is int else "double"

    def candidates(self) -> list[tuple[str, Value]]:
        """(sub-field, value) for every value a trial can get at the edges: each listed value, or
        both ends of a range."""
        if self.values is not None:
            return [(f"values[{i}]", v) for i, v in enumerate(self.values)]
        return [(end, v) for end, v in (("min", self.min), ("max", self.max)) if v is not None]


class TuneSpec(Strict):
    """Hyperparameter tuning: Vertex AI runs the job once per trial with different trainer flags."""

    metric: str = Field(
        DEFAULT_METRIC,
        pattern=r"^\S{1,128}$",
        description="the metric tag the trainer reports (trainer.hypertune_metric; "
        "default accuracy: the eval accuracy), or the tag your own code reports with cloudml-hypertune",
    )
    goal: Literal["maximize", "minimize"] = Field("maximize", description="maximize or minimize the metric")
    max_trials: int = Field(10, ge=1, le=10_000, description="trials in all")
    parallel_trials: int = Field(1, ge=1, description="trials running at once (<= max_trials)")
    max_failed_trials: int = Field(
        0, ge=0, description="failed trials before the study fails (0: Vertex AI decides)"
    )
    algorithm: Literal["auto", "grid", "random"] = Field(
        "auto", description="auto (the service's default search), grid or random"
    )
    parameters: dict[str, TuneParameter] = Field(
        min_length=1,
        description="trainer: fields to tune (without trainer:, your code's argument names) "
        "-> {min, max, scale, type} or {values}",
    )

    @model_validator(mode="after")
    def _counts(self) -> TuneSpec:
        if self.parallel_trials > self.max_trials:
            raise problem(
                f"{self.parallel_trials} parallel trials exceed max_trials {self.max_trials}",
                sub="parallel_trials",
                hint=f"use parallel_trials <= {self.max_trials}",
            )
        if self.max_failed_trials > self.max_trials:
            raise problem(
                f"{self.max_failed_trials} exceeds max_trials {self.max_trials}",
                sub="max_failed_trials",
                hint=f"use max_failed_trials <= {self.max_trials}",
            )
        return self

    def kind(self, name: str, *, trainer: bool = True) -> str:
        """The StudySpec parameter type of parameter `name`: a trainer field's (`trainer`), or,
        for your own code's argument, from the values (a range of whole numbers is an integer)."""
        param = self.parameters[name]
        if not trainer:
            whole = param.values is None and all(
                isinstance(b, int) and not isinstance(b, bool) for b in (param.min, param.max)
            )
            return param.kind(int if whole else float)
        flag = BY_NAME.get(name)
        return param.kind(flag.type if flag else float)


# A job without trainer: tunes its own arguments: the id is the name, passed as --NAME=VALUE.
_ARG_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,127}$")
# On the tuning job of such a spec: its parameter ids are the code's own argument names, kept as
# they are when its trials are read back (vertex/hptuning.py, the sandbox), not trainer fields.
PARAMS_LABEL, VERBATIM = "vertex-trainer-params", "verbatim"


def own_args(spec: JobSpec) -> bool:
    """True when a tuned spec varies its code's own arguments (no trainer: block)."""
    return spec.trainer is None


def parameter_id(spec: JobSpec, name: str) -> str:
    """The StudySpec parameterId of parameter `name`: Vertex AI passes `--<id>=<value>` to each
    trial, so it is the trainer's flag spelling (learning_rate -> learning-rate), or your code's
    argument name as written."""
    return name if own_args(spec) else name.replace("_", "-")


@dataclass(frozen=True)
class Search:
    """What a study's search reads of a tuned job (tuning/tuning_run.py plan_trials and
    trial_args; the sandbox's tuning service, which has only the StudySpec): the job's name, its
    tune: block, whether the parameters are your code's own arguments (no trainer: block) and
    the seed of the random draws (trainer.seed, else 0)."""

    name: str
    tune: TuneSpec
    own_args: bool
    seed: int = 0

    @classmethod
    def of(cls, spec: JobSpec) -> Search:
        """A tuned spec's search (ValueError for a spec without a tune: block)."""
        if spec.tune is None:
            raise ValueError(f"{spec.name}: not a tuning spec (no tune: block)")
        seed = (spec.trainer.seed if spec.trainer is not None else None) or 0
        return cls(spec.name, spec.tune, own_args(spec), int(seed))

    def parameter_id(self, name: str) -> str:
        """`parameter_id` of the job this search is of."""
        return name if self.own_args else name.replace("_", "-")

    def kind(self, name: str) -> str:
        """The StudySpec kind of parameter `name` (double, integer, discrete, categorical)."""
        return self.tune.kind(name, trainer=not self.own_args)

    def grid_size(self) -> int | None:
        """How many combinations a grid search has (integer ranges step by 1; a double range,
        which grid refuses, counts none), or None for another algorithm."""
        if self.tune.algorithm != "grid":
            return None
        size = 1
        for name, p in self.tune.parameters.items():
            if p.values is not None:
                size *= len(p.values)
            elif self.kind(name) == "integer":
                size *= int(p.bounds[1]) - int(p.bounds[0]) + 1
        return size


def trial_count(spec: JobSpec) -> int | None:
    """The most trials the spec's search runs (what its worst case is priced by): max_trials, or a
    grid's combinations when there are fewer (the service stops when each was tried once); None
    for a spec without a tune: block."""
    if spec.tune is None:
        return None
    size = Search.of(spec).grid_size()
    return spec.tune.max_trials if size is None else min(size, spec.tune.max_trials)


def grid_warning(spec: JobSpec) -> str | None:
    """A grid search whose max_trials is under its combinations tries only the first ones, in
    order (the last values of the first parameters never): said, with the count that covers it."""
    if spec.tune is None:
        return None
    size = Search.of(spec).grid_size()
    if size is None or size <= spec.tune.max_trials:
        return None
    return (
        f"warning: tune.max_trials: {spec.tune.max_trials} trials try {spec.tune.max_trials} of "
        f"the grid's {size} combinations, in order, and never the rest (raise max_trials to "
        f"{size}, list fewer values, or use algorithm: random to sample the grid)"
    )


def category(value: Value) -> str:
    """A categorical value as the service holds it (text): booleans as true/false."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def tune_rules(spec: JobSpec) -> None:
    """Rules between `tune:` and the rest of the spec (raise SpecError)."""
    tune = spec.tune
    if tune is None:
        return
    if own_args(spec):
        _own_args_rules(spec, tune)
        return
    found: list[SpecError] = []
    trainer = trainer_of(spec)
    reported = trainer.hypertune_metric or DEFAULT_METRIC
    if tune.metric != reported:
        found.append(
            SpecError(
                "tune.metric",
                f"the trainer reports its eval accuracy as {reported!r}, not {tune.metric!r}",
                has_value=False,
                hint=f"set trainer.hypertune_metric: {tune.metric}, or tune.metric: {reported}",
            )
        )
    if not trainer.eval_data:
        found.append(
            SpecError(
                "trainer.eval_data",
                "tune: needs an evaluation set: the trainer reports the metric after evaluating",
                has_value=False,
                hint="set trainer.eval_data to the validation TFRecords",
            )
        )
    for name, param in tune.parameters.items():
        try:
            _parameter(spec, tune, name, param)
        except SpecError as e:
            found.append(e)
    if len(found) == 1:
        raise found[0]
    if found:
        raise SpecProblems(found)


def _own_args_rules(spec: JobSpec, tune: TuneSpec) -> None:
    """A job without trainer: tunes its own arguments: each name is a flag name, not already one
    of `args:` (a trial appends --NAME=VALUE after them; which one the code reads would depend on
    its parser), and the tuning job has room for its label."""
    found: list[SpecError] = []
    for name in tune.parameters:
        field = f"tune.parameters.{name}"
        if not _ARG_NAME.match(name):
            found.append(
                SpecError(
                    field,
                    "is not an argument name: each trial passes --NAME=VALUE to your code",
                    has_value=False,
                    hint="name the argument as your code's parser does, e.g. learning_rate or "
                    "learning-rate (a letter, then letters, digits, '_', '-' or '.')",
                )
            )
            continue
        for i, arg in enumerate(spec.args):
            if arg == f"--{name}" or arg.startswith(f"--{name}="):
                found.append(
                    SpecError(
                        field,
                        f"is also given in args[{i}] ({arg!r}): each trial appends --{name}=VALUE "
                        "after args, and which of the two your code reads depends on its parser",
                        has_value=False,
                        hint=f"remove {arg!r} from args: (the trial passes --{name})",
                    )
                )
                break
    if len(spec.labels) >= MAX_USER_LABELS:
        found.append(
            SpecError(
                "labels",
                f"{len(spec.labels)} labels leave no room for the tuning job's {PARAMS_LABEL} label "
                f"(Vertex AI allows 64, vertex-trainer adds 3)",
                has_value=False,
                hint=f"keep at most {MAX_USER_LABELS - 1} labels",
            )
        )
    if len(found) == 1:
        raise found[0]
    if found:
        raise SpecProblems(found)


def _parameter(spec: JobSpec, tune: TuneSpec, name: str, param: TuneParameter) -> None:
    field = f"tune.parameters.{name}"
    if name not in SPEC_FLAGS or name in _NOT_TUNABLE:
        tunable = [f for f in SPEC_FLAGS if f not in _NOT_TUNABLE]
        near = suggest(name, tunable)
        raise SpecError(
            field,
            "is not a trainer: field" + (f"; did you mean '{near}'?" if near else ""),
            has_value=False,
            hint="tune a trainer: field, e.g. learning_rate, batch_size, warmup_epochs, optimizer",
        )
    flag_type = BY_NAME[name].type
    kind = param.kind(flag_type)
    if kind in ("double", "integer") and flag_type not in (int, float):
        what = "true/false" if flag_type is bool else "text"
        raise SpecError(
            f"{field}.min",
            f"trainer.{name} is {what}: a numeric range does not apply",
            has_value=False,
            hint="list the values to try: values: [...]",
        )
    if kind == "double" and flag_type is int:
        raise SpecError(
            f"{field}.type",
            f"trainer.{name} is an integer: a double range would pass fractions",
            has_value=False,
            hint="use type: integer, or list the values",
        )
    if kind == "double" and tune.algorithm == "grid":
        raise SpecError(
            field,
            "grid search takes integer, discrete or categorical parameters, not a double range",
            has_value=False,
            hint="list the values to try (values: [...]), or use algorithm: random or auto",
        )
    base = trainer_of(spec).model_dump()
    for sub, value in param.candidates():
        if kind == "integer":
            value = int(value)
        _check_value(f"{field}.{sub}", name, value, base)
        choices = BY_NAME[name].choices
        if choices and spec.runs_bundled_trainer and category(value) not in choices:
            raise SpecError(
                f"{field}.{sub}",
                f"the bundled trainer has no {name} {value!r}",
                has_value=False,
                hint="one of: " + ", ".join(choices),
            )
    _batch_split(spec, field, name, param, kind)


def _check_value(field: str, name: str, value: Value, base: dict[str, Any]) -> None:
    """`value` must be valid for trainer field `name`: TrainerArgs's own type, bounds and choices."""
    try:
        TrainerArgs.model_validate({**base, name: value})
    except ValidationError as exc:
        errors = [e for e in exc.errors(include_url=False) if e["loc"] and e["loc"][0] == name]
        if not errors:  # another field: the trainer block's own problem, reported elsewhere
            return
        message = errors[0]["msg"].removeprefix("Value error, ")
        doc = TrainerArgs.model_fields[name].description
        raise SpecError(
            field, f"{value!r} is not a valid trainer.{name}: {message}", has_value=False, hint=doc or None
        ) from None


def _batch_split(spec: JobSpec, field: str, name: str, param: TuneParameter, kind: str) -> None:
    """A tuned global batch must split evenly over every replica, as trainer.batch_size must."""
    if name != "batch_size":
        return
    try:
        devices = spec.total_devices
    except Exception:
        return
    if devices <= 1:
        return
    # one data-parallel replica per GPU or TPU chip (Vertex AI's replicas are machines)
    over = f"{devices} {hw.device_noun(spec.hardware.machine_type, spec.hardware.accelerator_type)}s"
    if kind == "integer":
        raise SpecError(
            f"{field}.min",
            f"a batch size range draws sizes that do not split over {over}",
            has_value=False,
            hint=f"list multiples of {devices}: values: [{devices * 32}, {devices * 64}]",
        )
    for sub, value in param.candidates():
        if float(value) % devices:
            raise SpecError(
                f"{field}.{sub}",
                f"the global batch {value:g} does not split evenly over {over}",
                has_value=False,
                hint=f"use a multiple of {devices}",
            )
