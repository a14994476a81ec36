"""The API of `vertex-trainer cost` and `dev refresh-prices` (docs/contract.md section 12).

from vertex_trainer import api
spec = api.load_spec("job_specs/resnet50-h100x8-flex.yaml")
api.cost(spec, throughput=24000).to_json()      # hourly, worst case, expected per attempt
api.cost(spec, compare=True).recommendation     # flex-start, spot, standard or a reservation
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from vertex_trainer import pricing, regions
from vertex_trainer.api.core import require_spec, settings_from_env
from vertex_trainer.cost import compare as cost_compare
from vertex_trainer.cost import estimate as costs
from vertex_trainer.cost.billing_catalog import BillingClient
from vertex_trainer.errors import VertexTrainerError
from vertex_trainer.gcp.storage import MAX_JSON_BYTES, json_object, read_json
from vertex_trainer.settings import RetryPolicy, Settings
from vertex_trainer.vertex.quotas import QuotasClient

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.cost.compare import Comparison
    from vertex_trainer.cost.estimate import Estimate
    from vertex_trainer.pricing import PriceBook
    from vertex_trainer.spec import JobSpec

__all__ = ["cost", "job_cost", "prices", "refresh_prices"]


def prices(*, live: bool = False, settings: Settings | None = None) -> PriceBook:
    """The prices: the snapshot shipped in the package, or (`live`) read now from the Cloud
    Billing Catalog API at the settings' endpoint.

    Args:
        live: read the Billing API instead of the snapshot (--live-prices).
        settings: the process settings (default: from the environment).
    Returns:
        A PriceBook (source "snapshot" or "billing-api")."""
    if not live:
        return pricing.load_snapshot()
    return BillingClient(settings=settings or settings_from_env()).price_book()


MAX_EXAMPLES = 10**15  # a manifest's count past this is no dataset's (and overflows a float's hours)


def _reader(settings: Settings):
    """Reads the dataset's manifest.json by local path or gs:// URI, as cost_per_epoch and the
    estimate take it. It is the dataset's (whoever writes the data's bucket or folder wrote it):
    None when there is none, or it is over storage.MAX_JSON_BYTES, not a regular file or not a
    JSON object; ValueError, which the estimate's note quotes, when its splits are not the shape
    `data convert` writes (an error there was a traceback)."""

    def read(path: str) -> dict | None:
        data = read_json(settings, path) if path.startswith("gs://") else _local_json(path)
        splits = (data or {}).get("splits")
        train = splits.get("train") if isinstance(splits, dict) else None
        examples = train.get("examples") if isinstance(train, dict) else None
        if splits is not None and not isinstance(splits, dict):
            raise ValueError(f"its splits are {_shown(splits)}, not an object")
        if train is not None and not isinstance(train, dict):
            raise ValueError(f"its splits.train is {_shown(train)}, not an object")
        if examples is not None and (type(examples) is not int or not 0 <= examples <= MAX_EXAMPLES):
            raise ValueError(f"its splits.train.examples is {_shown(examples)}, not a count of examples")
        return data

    return read


def _local_json(path: str) -> dict | None:
    """The JSON object in a local regular file of at most storage.MAX_JSON_BYTES, else None (a
    FIFO is never opened)."""
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        data = f.read(MAX_JSON_BYTES + 1)
    return json_object(data) if len(data) <= MAX_JSON_BYTES else None


def _shown(value: object) -> str:
    """A value from the manifest as a note quotes it: its repr (control characters escaped), short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def cost(
    spec: JobSpec,
    *,
    throughput: float | None = None,
    bench: str | dict | None = None,
    live: bool = False,
    compare: bool = False,
    can_wait: bool = True,
    checkpoints: bool | None = None,
    read_manifest: bool = True,
    examples_per_epoch: int | None = None,
    epochs: int | None = None,
    settings: Settings | None = None,
) -> Estimate | Comparison:
    """What the spec's plan costs (docs/contract.md section 12), before anything is sent.

    Args:
        spec: the job spec, from load_spec.
        throughput: the job's examples per second (--throughput).
        bench: a `bench --output json` result, or the path of a file holding one (--bench).
        live: read prices from the Billing API instead of the snapshot (--live-prices).
        compare: also the alternatives and one recommendation (--compare).
        can_wait: the start may wait for capacity (False: --start-now).
        checkpoints: the trainer resumes from checkpoints (None: the bundled trainer does).
        read_manifest: read the dataset's manifest.json for the examples per epoch.
        examples_per_epoch: a job running your own code (no trainer:): the examples one epoch
            trains on (--examples-per-epoch); needed with a throughput, refused for the bundled
            trainer (its trainer: block says it).
        epochs: a job running your own code: how many epochs (--epochs, default 1).
        settings: the process settings (default: from the environment).
    Returns:
        An Estimate (`.to_json()` is the --output json object), or with `compare` a Comparison
        (`.rows`, `.recommendation`).
    Raises:
        UserError: a throughput for your own code without examples_per_epoch, or the two
            figures given for the bundled trainer (exit 2)."""
    require_spec(spec, "cost")
    settings = settings or settings_from_env()
    name = "the bench result"
    if isinstance(bench, str):
        name, bench = bench, costs.load_bench(bench)
    rate = costs.throughput_of(spec, examples_per_sec=throughput, bench=bench, bench_name=name)
    own = costs.OwnEpochs(examples_per_epoch, epochs)
    costs.check_own_epochs(spec, own, rate)
    book = prices(live=live, settings=settings)
    reader = _reader(settings) if read_manifest else None
    est = costs.estimate(spec, book, throughput=rate, read_json=reader, own=own)
    if not compare:
        return est
    return cost_compare.compare(
        spec, book, est, can_wait=can_wait, checkpoints=checkpoints, quota=_quota_reader(spec, settings)
    )


def _quota_reader(spec: JobSpec, settings: Settings):
    """(accelerator, strategy, region) -> the quota limit, when the Cloud Quotas API answers; else
    None (quota is shown where readable, never required)."""
    if not (spec.project and settings.quotas_endpoint):
        return None
    client = QuotasClient(spec.project, settings=settings, retry=RetryPolicy(attempts=2, deadline=5))
    broken: list[bool] = []

    def read(accelerator: str, strategy: str, region: str) -> int | None:
        metric = regions.quota_metric(accelerator, strategy)
        if not metric or broken:
            return None
        try:
            found = client.limit(metric, region)
        except VertexTrainerError:
            broken.append(True)
            return None
        return None if found is None else found.limit

    return read


def job_cost(data: dict) -> dict | None:
    """What an ended CustomJob cost (run time x hourly list price of the snapshot; an estimate,
    not the bill).

    Args:
        data: the CustomJob as the REST API returns it (Job.data).
    Returns:
        The "cost" object of `status --output json`, or None for a job that has not run."""
    return costs.job_cost(data, pricing.load_snapshot())


def refresh_prices(path: str | None = None, *, settings: Settings | None = None) -> dict:
    """Read Vertex AI's SKUs from the Cloud Billing Catalog API (every page) and write the price
    snapshot (`vertex-trainer dev refresh-prices`).

    Args:
        path: where to write it (default: the snapshot shipped in the package).
        settings: the process settings; VERTEX_TRAINER_BILLING_ENDPOINT picks a stand-in.
    Returns:
        {"path", "as_of", "skus_read", "skus_used", "families", "accelerators"} (counts)."""
    book = BillingClient(settings=settings or settings_from_env()).price_book()
    target = str(path or pricing.shipped_path())  # os.replace takes a path: the package is on disk
    tmp = f"{target}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(dict(book.data), indent=1) + "\n")
    os.replace(tmp, target)
    data = book.data
    return {
        "path": target,
        "as_of": data["as_of"],
        "skus_read": data["skus_read"],
        "skus_used": data["skus_used"],
        "families": len(data["families"]),
        "accelerators": len(data["accelerators"]),
    }
