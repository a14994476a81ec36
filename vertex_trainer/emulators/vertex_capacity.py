"""Capacity and quota refusals for the fake Vertex AI (issues 13 and 21): what the creates of one
scheduling strategy, in one region or every region, get. `FakeVertex` mixes `CapacityScripts` in:

    fake.no_capacity("FLEX_START")             # its jobs queue, then end FAILED with code 8
    fake.no_capacity(region="us-central1")     # every job in us-central1 does
    fake.no_quota("SPOT", region="us-east5")   # its creates there answer 429 RESOURCE_EXHAUSTED
    fake.not_offered(region="europe-west1")    # creates there answer 400: the machine is not offered
    fake.on_strategy("STANDARD", script=[...], error_code=3, error_message="...")

The most specific script wins: (strategy, region), then (strategy, any region), then (any
strategy, region). The wording is the service's: "Resources are insufficient in region: R.
Please try a different region." and "The following quota metrics exceed quota limits:
aiplatform.googleapis.com/custom_model_training_preemptible_nvidia_h100_gpus". A region that does
not offer the job's machine answers the create 400 INVALID_ARGUMENT in the service's "List of
found errors" form (the form of its machine_spec refusals: GoogleCloudPlatform/generative-ai#151,
prefect-gcp#175); the sentence itself (NOT_OFFERED_ERROR) is ours: no public trace of the
service's exact words for this case was found.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

CAPACITY_ERROR = "Resources are insufficient in region: {region}. Please try a different region."
NOT_OFFERED_ERROR = (
    "List of found errors:\t1.Field: job_spec.worker_pool_specs[0].machine_spec."
    "accelerator_type; Message: Machine type \"{machine}\" with accelerator "
    "\"{accelerator}\" is not supported in region {region}.\t"
)
# Scheduling.Strategy numbers (the generated REST client sends enums as numbers).
_STRATEGY_NUMBERS = {"1": "ON_DEMAND", "2": "LOW_COST", "3": "STANDARD", "4": "SPOT", "6": "FLEX_START"}
# Custom-training quota metric names of a few accelerators (the rest: lowercased + _gpus).
_QUOTA_NAMES = {
    "NVIDIA_H100_80GB": "nvidia_h100_gpus",
    "NVIDIA_H100_MEGA_80GB": "nvidia_h100_mega_gpus",
    "NVIDIA_TESLA_T4": "nvidia_t4_gpus",
    "NVIDIA_TESLA_V100": "nvidia_v100_gpus",
    "NVIDIA_TESLA_A100": "nvidia_a100_gpus",
    "NVIDIA_H200_141GB": "nvidia_h200_gpus",
    "TPU_V2": "tpu_v2",
    "TPU_V3": "tpu_v3",
}


@dataclass(frozen=True)
class Outcome:
    """What the creates of one strategy get: a refusal of the create itself (`refuse`: an HTTP
    status, e.g. 429; nothing is stored), or jobs that follow `script` and, when they end FAILED,
    carry `error_code` and `error_message` ("{region}" is filled in)."""

    script: tuple[str, ...] | None = None  # None: the fake's script
    error_code: int = 3
    error_message: str | None = None  # None: the fake's error message
    refuse: int = 0
    message: str | None = None  # the refusal's message (None: the quota wording);
    # "{region}", "{machine}", "{accelerator}" are filled in


ANY = "*"


class CapacityScripts:
    """The on_strategy() controls of FakeVertex (it provides `_lock` and `outcomes`)."""

    _lock: Any
    outcomes: dict[tuple[str, str], Outcome]

    def on_strategy(
        self,
        strategy: str | None = None,
        *,
        region: str | None = None,
        script: list[str] | tuple[str, ...] | None = None,
        error_code: int = 3,
        error_message: str | None = None,
        refuse: int = 0,
        message: str | None = None,
    ) -> Outcome:
        """Script the creates whose scheduling.strategy is `strategy` (STANDARD, SPOT,
        FLEX_START, or the spec's spelling; None: any) in `region` (None: any): `refuse=429`
        answers them RESOURCE_EXHAUSTED with `message` and stores nothing; else their jobs
        follow `script`, and a FAILED end carries `error_code` and `error_message`."""
        outcome = Outcome(tuple(script) if script else None, error_code, error_message, refuse, message)
        key = (strategy.upper().replace("-", "_") if strategy else ANY, region or ANY)
        with self._lock:
            self.outcomes[key] = outcome
        return outcome

    def no_capacity(
        self,
        strategy: str | None = None,
        *,
        region: str | None = None,
        states: tuple[str, ...] = ("JOB_STATE_QUEUED",),
    ) -> Outcome:
        """Jobs of `strategy` (None: any) in `region` (None: any) go through `states`, then end
        FAILED with code 8 (RESOURCE_EXHAUSTED, "Resources are insufficient in region: R. ..."), as
        a Flex Start job whose max_wait passed."""
        return self.on_strategy(
            strategy,
            region=region,
            script=[*states, "JOB_STATE_FAILED"],
            error_code=8,
            error_message=CAPACITY_ERROR,
        )

    def no_quota(
        self, strategy: str | None = None, message: str | None = None, *, region: str | None = None
    ) -> Outcome:
        """Creates of `strategy` (None: any) in `region` (None: any) answer 429
        RESOURCE_EXHAUSTED naming the custom-training quota metric of the job's accelerator (the
        preemptible_ one for SPOT and FLEX_START)."""
        return self.on_strategy(strategy, region=region, refuse=429, message=message)

    def not_offered(self, strategy: str | None = None, *, region: str, message: str | None = None) -> Outcome:
        """Creates of `strategy` (None: any) in `region` answer 400 INVALID_ARGUMENT: the region
        does not offer the job's machine and accelerator (NOT_OFFERED_ERROR, or `message`), as
        when a region table read from the docs is out of date. Nothing is stored."""
        return self.on_strategy(strategy, region=region, refuse=400, message=message or NOT_OFFERED_ERROR)

    def unscript(self) -> None:
        """Forget every scripted outcome: creates are answered as if none had been scripted."""
        with self._lock:
            self.outcomes.clear()

    def outcome_of(self, data: dict[str, Any], region: str | None = None) -> Outcome:
        """The outcome of a create (its parsed CustomJob, in `region`, default: the region of its
        name); a refusal comes with its message."""
        spec = data.get("jobSpec") or {}
        strategy = str((spec.get("scheduling") or {}).get("strategy") or "STANDARD")
        strategy = _STRATEGY_NUMBERS.get(strategy, strategy)
        region = region or region_of(data.get("name", ""))
        with self._lock:
            outcome = next(
                (
                    self.outcomes[k]
                    for k in ((strategy, region), (strategy, ANY), (ANY, region))
                    if k in self.outcomes
                ),
                Outcome(),
            )
        if not outcome.refuse:
            return outcome
        pool = (spec.get("workerPoolSpecs") or [{}])[0]
        machine = pool.get("machineSpec") or {}
        accelerator = str(machine.get("acceleratorType") or "CPUS")
        if outcome.message:
            text = outcome.message
            for name, value in (
                ("region", region),
                ("machine", str(machine.get("machineType"))),
                ("accelerator", accelerator),
            ):
                text = text.replace("{" + name + "}", value)
            return dataclasses.replace(outcome, message=text)
        metric = _QUOTA_NAMES.get(accelerator, accelerator.lower() + "_gpus")
        preemptible = "preemptible_" if strategy in ("SPOT", "FLEX_START") else ""
        return dataclasses.replace(
            outcome,
            message=(
                "The following quota metrics exceed quota limits: "
                f"aiplatform.googleapis.com/custom_model_training_{preemptible}{metric}"
            ),
        )


def region_of(name: str) -> str:
    """The region of a resource name (projects/P/locations/REGION/...), ANY for any other name.
    (The stand-ins' own reading: they share no code with the client's vertex_trainer.regions.)"""
    parts = name.split("/")
    return parts[3] if len(parts) > 3 and parts[2] == "locations" else ANY
