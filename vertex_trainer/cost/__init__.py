"""Cost: what a job will cost before anything is sent, the budget it must stay under, what a
finished one cost, and the alternatives (docs/cost.md; docs/contract.md section 12).

    estimate.py        the estimate, a finished job's cost (`job_cost`)
    budget.py          the budget check (scheduling.max_cost, --max-cost): exit 2, nothing sent
    compare.py         `cost --compare`: the same accelerator elsewhere, other schedulings
    scaling_model.py   what scaling costs: a small model of data-parallel training across machines
    billing_catalog.py the Cloud Billing Catalog API: Vertex AI's public SKUs (`dev refresh-prices`)
    cost_text.py       costs for people

The prices themselves are the core's price book (vertex_trainer.pricing). Other capabilities use
the names below only.
"""

from typing import TYPE_CHECKING

from vertex_trainer import interface

if TYPE_CHECKING:
    from vertex_trainer.cost.estimate import job_cost

__all__ = ["job_cost"]
if not TYPE_CHECKING:  # mypy sees the imports above; the names resolve on first use
    __getattr__, __dir__ = interface.exports(__name__, {"job_cost": "estimate"})
