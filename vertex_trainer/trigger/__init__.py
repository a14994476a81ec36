"""Event-driven runs: a dataset lands in Cloud Storage, a run starts (docs/contract.md section 6).

    events.py   pure: which finalized objects start a run (`<prefix><folder>/<marker>`), the
                idempotency key of an object generation, the `{{ trigger.* }}` variables
    bundle.py   the deployable Cloud Run function directory (`trigger render`)
    gcloud.py   the gcloud commands and IAM bindings that deploy it (`trigger deploy`)

The function itself (main.py, rendered from templates/trigger_main.py.j2) is an edge like the
CLI: it reads its environment and calls `api.on_object_finalized`, which decides with events.py
and starts the run through the same submit paths as the CLI. See docs/events.md.
"""

from vertex_trainer.trigger.events import (
    FINALIZED,
    BadEvent,
    Decision,
    ObjectEvent,
    TriggerConfig,
    check_trigger_args,
    decide,
    event_key,
    sample_vars,
    trigger_vars,
)

__all__ = [
    "FINALIZED",
    "BadEvent",
    "Decision",
    "ObjectEvent",
    "TriggerConfig",
    "check_trigger_args",
    "decide",
    "event_key",
    "sample_vars",
    "trigger_vars",
]
