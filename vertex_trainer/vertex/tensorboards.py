"""Vertex AI TensorBoard instances (`projects.locations.tensorboards`), for `tensorboard: auto`.

REST (aiplatform v1): create (`POST {parent}/tensorboards`, an Operation whose response is the
Tensorboard), get, list (`filter`, the one pager). The create takes no client-chosen id, so it is
made idempotent by what the tool owns: the instance it makes carries the display name
`vertex-trainer` and the label `vertex-trainer-managed=true`, and `ensure` lists by that label
before it creates. A create whose answer was lost (a timeout, a dropped connection, a 5xx) is
followed by the same list (`look_after_lost`), and what it finds is adopted instead of sending a
second create. Two submits racing past the first list would each make one: after a create the
list is read again and the oldest instance (by createTime, then name) is the one every client
uses; the one just made, when it is not that one, is deleted.

`tensorboard_url(tensorboard, job)` is a job's page in Vertex AI TensorBoard's web app.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from vertex_trainer.gcp.http import ApiError, Budget, Transient, decode, look_after_lost
from vertex_trainer.gcp.lro import wait_operation
from vertex_trainer.vertex.service import CollectionClient

__all__ = [
    "DISPLAY_NAME",
    "MANAGED_LABEL",
    "Ensured",
    "FindOrCreate",
    "TensorboardsClient",
    "tensorboard_url",
]

DISPLAY_NAME = "vertex-trainer"
MANAGED_LABEL = "vertex-trainer-managed"
MANAGED_VALUE = "true"
_NAME = r"projects/[^/]+/locations/([a-z0-9-]+)/tensorboards/[^/]+"


def tensorboard_url(tensorboard: str | None, job: str | None) -> str | None:
    """The page of CustomJob `job`'s run in Vertex AI TensorBoard, or None when `tensorboard` is
    not an instance's name (none, or the dry run's placeholder) or `job` has no id yet.

    The form is the one google-cloud-aiplatform links a custom job's TensorBoard with
    (google/cloud/aiplatform/utils/console_utils.py `custom_job_tensorboard_console_uri`, and
    utils/tensorboard_utils.py `get_experiment_url`): the job's experiment in the instance is
    named by the job's id, and its resource name, '/' written '+', follows
    https://<region>.tensorboard.googleusercontent.com/experiment/. tests/tensorboard holds the
    two equal."""
    m = re.fullmatch(_NAME, tensorboard or "")
    job_id = (job or "").rsplit("/", 1)[-1]
    if m is None or not job_id:
        return None
    experiment = f"{tensorboard}/experiments/{job_id}".replace("/", "+")
    return f"https://{m[1]}.tensorboard.googleusercontent.com/experiment/{experiment}"


@dataclass(frozen=True)
class FindOrCreate:
    """The step a submit of `tensorboard: auto` makes in `region` before its job is created: list
    the instances labelled as the tool's, create one when there is none (the plan's value; a dry
    run lists it, the executor makes it).

    Attributes: project, region; requests: the list (GET with its filter) and the create (POST
    with its body), as a dry run shows requests."""

    project: str
    region: str
    requests: tuple[dict[str, Any], ...]

    def describe(self) -> str:
        """'find the TensorBoard instance in us-central1 labelled vertex-trainer-managed=true;
        create it when there is none'."""
        return (
            f"find the TensorBoard instance in {self.region} labelled {MANAGED_LABEL}={MANAGED_VALUE} "
            f"(display name {DISPLAY_NAME}); create it when there is none"
        )

    def to_dict(self) -> dict[str, Any]:
        """The dry run's JSON `checks[]` entry."""
        return {
            "check": "tensorboard",
            "region": self.region,
            "label": f"{MANAGED_LABEL}={MANAGED_VALUE}",
            "display_name": DISPLAY_NAME,
            "requests": [dict(r) for r in self.requests],
        }


@dataclass(frozen=True)
class Ensured:
    """What `ensure` found or made: the instance (REST JSON), and whether this call created it."""

    data: dict[str, Any]
    created: bool

    @property
    def name(self) -> str:
        return str(self.data.get("name") or "")


class TensorboardsClient(CollectionClient):
    """The tensorboards collection of one project and region: get and list come from
    `CollectionClient`; `ensure` finds or creates the tool's instance."""

    collection = "tensorboards"
    ops: ClassVar[dict[str, str]] = {
        "get": "get TensorBoard",
        "cancel": "cancel",
        "list": "list TensorBoards",
        "create": "create TensorBoard",
        "delete": "delete TensorBoard",
    }
    retry_hint = (
        "the Vertex AI API is unreachable or overloaded; run the same command again later "
        "(the TensorBoard instance is looked up by its label first, never made twice)"
    )

    @staticmethod
    def managed_filter() -> str:
        """The list filter of the tool's instances (AIP-160)."""
        return f'labels.{MANAGED_LABEL}="{MANAGED_VALUE}"'

    @staticmethod
    def body() -> dict[str, Any]:
        """The Tensorboard the tool creates (REST JSON)."""
        return {
            "displayName": DISPLAY_NAME,
            "description": "made by vertex-trainer for tensorboard: auto",
            "labels": {MANAGED_LABEL: MANAGED_VALUE},
        }

    def plan(self) -> FindOrCreate:
        """The find-or-create step, as requests (opens no connection)."""
        url = self.url(f"{self.parent}/{self.collection}")
        return FindOrCreate(
            self.project,
            self.region,
            (
                {"method": "GET", "url": url, "params": {"filter": self.managed_filter()}},
                {"method": "POST", "url": url, "body": self.body()},
            ),
        )

    def managed(self, budget: Budget | None = None) -> list[dict[str, Any]]:
        """The tool's instances in the region, oldest first (the first is the one used)."""
        found = self.list(self.managed_filter(), budget=budget)
        return sorted(found, key=lambda t: (t.get("createTime", ""), t.get("name", "")))

    def find(self, budget: Budget | None = None) -> dict[str, Any] | None:
        """The tool's instance (the oldest should there be several), or None."""
        found = self.managed(budget)
        return found[0] if found else None

    def create_once(self) -> dict[str, Any]:
        """POST one create; returns the Operation. Raises Transient when the outcome is unknown."""
        path = f"v1/{self.parent}/{self.collection}"
        return decode(self.api.send(self.ops["create"], "POST", path, json=self.body()))

    def ensure(self, *, timeout: float | None = None) -> Ensured:
        """Find the tool's instance in the region, or create it (at most one: see the module doc).

        Args: timeout: seconds to wait for the create's operation (None: until it ends).
        Returns: the instance, and whether this call created it."""
        budget = self.api.budget()
        found = self.find(budget)
        if found is not None:
            return Ensured(found, False)
        while True:
            try:
                operation = self.create_once()
                break
            except Transient as exc:  # committed or not: look before sending again
                self.log(f"{self.ops['create']}: {exc}; checking whether it was created")
                found = look_after_lost(lambda: self.find(budget), exc, window=self.api.retry.read_timeout)
                if found is not None:
                    return Ensured(found, False)
                budget.backoff(self.ops["create"], str(exc), retry_hint=self.retry_hint)
        made = wait_operation(
            self.api, operation, poll=self.settings.poll, what=self.ops["create"], timeout=timeout
        )
        made = {k: v for k, v in made.items() if k != "@type"}
        oldest = self.find(budget) or made
        if made.get("name") and oldest.get("name") != made.get("name"):  # another submit's was first
            self.log(f"{self.ops['create']}: {oldest.get('name')} was made first; using it")
            self.delete(str(made["name"]))
            return Ensured(oldest, False)
        return Ensured(made, True)

    def delete(self, name: str, *, timeout: float | None = None) -> bool:
        """Delete the instance `name` and follow the operation; False when there was none."""
        response = self.api.call(self.ops["delete"], "DELETE", f"v1/{name}", allow=(404,))
        if response.status_code == 404:
            return False
        wait_operation(
            self.api, response.json(), poll=self.settings.poll, what=self.ops["delete"], timeout=timeout
        )
        return True

    def _hint(self, op: str, err: ApiError) -> str | None:
        if err.code == 403 and op in (self.ops["create"], self.ops["list"]):
            verb = "create" if op == self.ops["create"] else "list"
            return (
                f"tensorboard: auto needs aiplatform.tensorboards.{verb} on project {self.project} "
                "(role roles/aiplatform.user); or name an instance: tensorboard: "
                "projects/P/locations/R/tensorboards/ID"
            )
        return None
