"""The job spec: one frozen, strict model, loaded once at the edge (docs/contract.md section 1).

    model.py     the pydantic models (JobSpec, HardwareSpec, ImageSpec, Scheduling, BootDisk)
    deploy.py    the deploy: block (DeploySpec) and its rules against the rest of the spec
    tune.py      the tune: block (TuneSpec) and its rules against the trainer's fields
    trainer.py   TrainerArgs, generated from the bundled trainer's flag table; check_trainer_flags
    load.py      YAML, `--set`, templates, override order -> JobSpec
    rules.py     the cross-field rules (run by JobSpec's validator) and cloud_problems
    plan_rules.py  the capacity plan's rules (fallback entries, reservations, persistent resource)
    images.py    the checks of values that reach a Dockerfile or a shell
    messages.py  pydantic errors -> SpecError / SpecProblems (dotted paths, did-you-mean)

Layering: this package imports only vertex_trainer.errors, .contract, .hardware and the trainer's
flag table and steps_per_execution choice (plus trainer.config inside check_trainer_flags);
nothing here reads os.environ.
"""

from vertex_trainer.spec.deploy_block import DeploySpec
from vertex_trainer.spec.images import (
    parse_staging,
    validate_image_reference,
    validate_image_values,
    validate_requirement,
)
from vertex_trainer.spec.load import apply_set, build_spec, load_spec, parse_assignments, read_yaml
from vertex_trainer.spec.model import (
    BootDisk,
    HardwareSpec,
    ImageSpec,
    JobSpec,
    Scheduling,
    json_schema,
    spec_hash,
)
from vertex_trainer.spec.rules import cloud_problems
from vertex_trainer.spec.trainer import TrainerArgs, check_trainer_flags
from vertex_trainer.spec.tune import TuneParameter, TuneSpec

__all__ = [
    "BootDisk",
    "DeploySpec",
    "HardwareSpec",
    "ImageSpec",
    "JobSpec",
    "Scheduling",
    "TrainerArgs",
    "TuneParameter",
    "TuneSpec",
    "apply_set",
    "build_spec",
    "check_trainer_flags",
    "cloud_problems",
    "json_schema",
    "load_spec",
    "parse_assignments",
    "parse_staging",
    "read_yaml",
    "spec_hash",
    "validate_image_reference",
    "validate_image_values",
    "validate_requirement",
]
