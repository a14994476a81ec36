"""The spec's `trainer:` block, generated from the bundled trainer's own flag table.

`trainer.flags.FLAGS` describes every flag of `python -m trainer.task` once; `TrainerArgs` is
built from the flags marked `spec=True` with pydantic's `create_model`, so a flag the trainer
gains is a spec field the same day, with the same type, choices, bounds and help. A few fields
are stricter in the spec (`_SPEC_RULES`); every other field is optional and unset means the
trainer's default. `extra_args` passes anything else through verbatim.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BeforeValidator, Field, create_model, field_validator

# performance/benchmark.py cuts its epoch with the trainer's own choice; below the API only spec/ knows
# the trainer (docs/architecture.md), so the bench takes it from here
from trainer.executions import choose_steps_per_execution as choose_steps_per_execution
from trainer.flags import BY_NAME as BY_NAME  # the trainer's defaults (bench --sweep's learning rate)
from trainer.flags import FACTORY_PATTERN, FLAGS, Flag
from vertex_trainer.contract import AIP_DIRS
from vertex_trainer.errors import SpecError
from vertex_trainer.spec.base import AsIs, Strict
from vertex_trainer.spec.factory import check_factory, runs_factory, trainer_of

if TYPE_CHECKING:  # model.py imports this module (directly or through the rules): named for the type checker
    from vertex_trainer.spec.model import JobSpec

# Where the spec is stricter than the trainer (or looser: `model` may name another image's model).
_SPEC_RULES: dict[str, dict[str, Any]] = {
    # An image.uri / image.context trainer may have other models; the bundled trainer's list is
    # checked by check_trainer_flags. Always rendered (the trainer's default, explicitly).
    # package.module:function is your own model factory in image.code (spec/factory.py).
    "model": {"choices": None, "pattern": rf"^[a-z0-9][a-z0-9_-]*$|{FACTORY_PATTERN}", "default": "resnet50"},
    "train_data": {"required": True},
    "num_classes": {"required": True, "ge": 2},
    "image_size": {"ge": 8, "le": 1024},
    # 0 (= automatic) is spelled by leaving it unset.
    "steps_per_epoch": {"ge": 1},
    # `auto` (or 0, or unset): the trainer chooses from the steps per epoch; auto is sent as 0.
    "steps_per_execution": {"auto": 0},
}
_BOUNDS = ("ge", "gt", "le", "lt")


class _TrainerBase(Strict):
    """The trainer's flags (docs/contract.md section 4). Unset fields fall back to the trainer's defaults."""

    if TYPE_CHECKING:  # a field of every TrainerArgs, added by _build
        extra_args: tuple[str, ...]

    @field_validator("keras", mode="before", check_fields=False)
    @classmethod
    def _keras_as_text(cls, v: Any) -> Any:
        # `keras: 3` in YAML is the integer 3; the flag's choices are text (auto, 2, 3).
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    def to_args(self) -> list[str]:
        """The container args: `--kebab-case=value`, in field order, then extra_args."""
        args = []
        for name in type(self).model_fields:
            value = getattr(self, name)
            if name == "extra_args" or value is None:
                continue
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, float) and value.is_integer():
                value = int(value)  # --warmup-epochs=5, not 5.0
            args.append(f"--{name.replace('_', '-')}={value}")
        return args + list(self.extra_args)


def _field(flag: Flag) -> tuple[Any, Any]:
    """(annotation, FieldInfo) of one spec field, from the flag and the spec's own rules."""
    rules = _SPEC_RULES.get(flag.name, {})
    choices = rules.get("choices", flag.choices)
    annotation: Any = Literal[tuple(choices)] if choices else flag.type
    kw: dict[str, Any] = {"description": flag.help or None}
    for bound in _BOUNDS:
        value = rules.get(bound, getattr(flag, bound))
        if value is not None:
            kw[bound] = value
    if "auto" in rules:  # the word `auto` besides the numbers: read as the trainer's value for it
        auto = rules["auto"]
        annotation = Annotated[
            annotation,
            BeforeValidator(
                lambda value: auto if isinstance(value, str) and value.strip().lower() == "auto" else value,
                json_schema_input_type=annotation | Literal["auto"],
            ),
        ]
    if rules.get("required"):
        return annotation, Field(**kw)
    if "default" in rules:
        return annotation, Field(rules["default"], **kw)
    return annotation | None, Field(None, **kw)


def _build() -> type[_TrainerBase]:
    fields: dict[str, Any] = {flag.name: _field(flag) for flag in FLAGS if flag.spec}
    fields["extra_args"] = (tuple[AsIs, ...], Field((), description="passed to the trainer verbatim, last"))
    return create_model(
        "TrainerArgs", __base__=_TrainerBase, __doc__=_TrainerBase.__doc__, __module__=__name__, **fields
    )


if TYPE_CHECKING:

    class TrainerArgs(_TrainerBase):
        """What the type checker sees: the fields come from the flag table at run time."""

        def __getattr__(self, name: str) -> Any: ...

else:
    TrainerArgs = _build()
SPEC_FLAGS = tuple(name for name in TrainerArgs.model_fields if name != "extra_args")


def check_trainer_flags(spec: JobSpec) -> None:
    """Parse the job's trainer args with the bundled trainer's own parser (no TensorFlow import).

    A model the bundled trainer lacks, or a misspelt extra flag, then fails here with exit 2, not
    after an image build and a queue wait on Vertex AI. Call it for specs that run the bundled
    trainer (`spec.runs_bundled_trainer`) and for local runs. Skipped when the trainer package is
    not installed beside the client.
    """
    if spec.trainer is None:  # script jobs (issue 32): your own code has no trainer flags to check
        return
    if runs_factory(spec):  # your model factory: it must import and take the trainer's arguments
        check_factory(spec)
    try:
        import trainer.config  # noqa: F401  (argparse and the trainer's parser: only when checked)
    except ImportError:
        return
    message = _refusal(tuple(spec.trainer.to_args()))
    if message is not None:
        raise SpecError(
            _field_of(spec, message),
            f"the bundled trainer refuses it: {message}",
            has_value=False,
            hint="see `python -m trainer.task --help` for its flags and models",
        ) from None


@functools.lru_cache(maxsize=32)
def _refusal(args: tuple[str, ...]) -> str | None:
    """The bundled trainer's UsageError message for `args` (None: it accepts them). Parsed once
    per args: `validate` and `submit` check the same spec twice (load_spec, then check), and
    building the trainer's argparse parser is most of the cost."""
    # the trainer's parser, only when flags are checked: at load the spec imports only its flag
    # table (tests/foundation: test_the_spec_imports_only_the_trainers_flag_table)
    from trainer.config import UsageError as TrainerUsage
    from trainer.config import parse_flags

    dirs = {var: f"/{sub}/" for var, sub in AIP_DIRS.items()}
    try:
        parse_flags(list(args), environ=dirs)
    except TrainerUsage as e:
        return str(e)
    return None


def _field_of(spec: JobSpec, message: str) -> str:
    """The dotted spec field a trainer UsageError is about."""
    trainer = trainer_of(spec)
    extra = "trainer.extra_args" if trainer.extra_args else "trainer"
    if message.startswith("unknown flags"):
        return extra
    m = re.search(r"--([a-z0-9][a-z0-9_-]*)", message)
    if m:
        name = m.group(1).replace("-", "_")
        if name in SPEC_FLAGS and getattr(trainer, name) is not None:
            return f"trainer.{name}"
    return extra
