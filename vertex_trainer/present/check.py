"""The text of `check` and `setup` (issue 33), from what the API returns."""

from __future__ import annotations

from typing import Any


def check_text(result: Any) -> str:
    """One line per item (`OK`, `WARN`, `FAIL`, the area, what was looked at, what was found),
    each FAIL followed by its fix, then the verdict. `result`: api.ProjectCheck."""
    lines = []
    for item in result.items:
        lines.append(f"{item.status:<4}  {item.area:<11} {item.name}: {item.detail}")
        if item.status == "FAIL" and item.fix:
            lines.append(f"      fix: {item.fix}")
    fails = sum(i.status == "FAIL" for i in result.items)
    warns = sum(i.status == "WARN" for i in result.items)
    if fails:
        lines.append(f"{fails} FAIL, {warns} WARN: not ready (`vertex-trainer setup SPEC` makes what it can)")
    else:
        lines.append(f"ready ({warns} WARN)" if warns else "ready")
    return "\n".join(lines)


def setup_text(result: Any) -> str:
    """What `setup` did or, with --dry-run, would do: each step, its request and its gcloud line;
    the bindings it did not grant. `result`: workflows.project_setup.SetupResult."""
    if not result.steps:
        return f"nothing to do: projects/{result.project} has what the job needs that setup can make"
    lines = ["# dry run: nothing was sent. setup would:"] if result.dry_run else []
    for step in result.steps:
        if step.binding and not step.done:
            mark = "to grant"
        else:
            mark = "would" if result.dry_run else ("done" if step.done else "skipped")
        lines.append(f"{mark}: {step.what}")
        if result.dry_run and step.url:
            lines.append(f"  {step.method} {step.url}")
        lines.append(f"  gcloud: {step.gcloud}")
    ungranted = [s for s in result.steps if s.binding and not s.done]
    if ungranted and not result.dry_run:
        lines.append(
            f"{len(ungranted)} IAM binding(s) not granted: someone with the right runs the gcloud "
            "lines above (or `vertex-trainer setup SPEC --grant` does, for the project and the "
            "service account)"
        )
    return "\n".join(lines)
