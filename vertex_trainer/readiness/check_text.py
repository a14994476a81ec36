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
    """What `setup` did or would do: each step, its request and its gcloud line; the bindings it
    did not grant. A dry run says that nothing was sent, not even a read, lists the reads setup
    would make and each step it could take, if missing; a plan says what it read.
    `result`: readiness.project_setup.SetupResult."""
    if result.dry_run:
        lines = [
            "# dry run: nothing was sent, not even a read, and no credentials were loaded.",
            "# setup would first read the project's state (what `vertex-trainer check` reads):",
            *(f"#   {read}" for read in result.reads),
            "# then take each of these steps whose look finds it missing:",
        ]
    elif not result.steps:
        return f"nothing to do: projects/{result.project} has what the job needs that setup can make"
    elif result.mode == "plan":
        lines = [
            f"# plan: read the project's state ({len(result.reads)} look(s), as `vertex-trainer check`); "
            "no change was sent. setup would:"
        ]
    else:
        lines = []
    suffix = ", if missing" if result.dry_run else ""
    for step in result.steps:
        if step.binding and not step.done:
            mark = "to grant"
        else:
            mark = "would" if result.mode != "apply" else ("done" if step.done else "skipped")
        lines.append(f"{mark}{suffix}: {step.what}")
        if result.mode != "apply" and step.url:
            lines.append(f"  {step.method} {step.url}")
        lines.append(f"  gcloud: {step.gcloud}")
    ungranted = [s for s in result.steps if s.binding and not s.done]
    if ungranted and result.mode == "apply":
        lines.append(
            f"{len(ungranted)} IAM binding(s) not granted: someone with the right runs the gcloud "
            "lines above (or `vertex-trainer setup SPEC --grant` does, for the project and the "
            "service account)"
        )
    if result.dry_run:
        lines.append(
            "`vertex-trainer setup SPEC --plan` reads the project, changes nothing, and lists only "
            "what is missing"
        )
    return "\n".join(lines)
