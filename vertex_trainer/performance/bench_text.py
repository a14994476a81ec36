"""`bench` for people (docs/contract.md section 9): the report api.bench returns, as lines. The
figures are performance.benchmark's report; only the words are here."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["bench_text", "dry_run_text", "sweep_dry_run_text", "sweep_text"]


def _rate(value: float | None) -> str:
    return f"{value:,.0f} examples/s" if value else "-"


def _cost_line(per_epoch: dict[str, Any] | None) -> str | None:
    """What one epoch costs (the report's "cost_per_epoch", docs/contract.md section 12)."""
    if not per_epoch:
        return None
    if per_epoch.get("usd") is not None:
        le = "at most " if per_epoch.get("upper_bound") else ""
        return (
            f"cost       {le}{per_epoch['usd']:,.2f} USD per epoch ({per_epoch['examples']:,} examples: "
            f"{per_epoch['hours']:,.2f} h x {per_epoch['hourly']:,.2f} USD/h {per_epoch['strategy']} in "
            f"{per_epoch['region']}, list prices as of {per_epoch['prices_as_of']})"
            + (f"; {per_epoch['note']}" if per_epoch.get("note") else "")
        )
    if per_epoch.get("usd_per_million_examples") is not None:
        return (
            f"cost       {per_epoch['usd_per_million_examples']:,.2f} USD per million examples "
            f"({per_epoch['hourly']:,.2f} USD/h {per_epoch['strategy']} in {per_epoch['region']}); "
            f"per epoch unknown: {per_epoch.get('reason')}"
        )
    return f"cost       per epoch unknown ({per_epoch.get('reason')})"


def bench_text(result: dict[str, Any]) -> str:
    """The bench report for people: both throughputs, the input wait and what bounds the job,
    the published reference, the cost per epoch, the notes and the key to adopt the jobs."""
    per = result["per_device_examples_per_sec"]
    lines = [
        f"bench      {result['spec']} on {result['hardware']}: {result['model']} "
        f"{result['image_size']} px, batch {result['global_batch_size']}, {result['precision']}, "
        f"{result['steps']} steps ({result['steps_per_execution']} per execution)",
        f"synthetic  {_rate(result['synthetic_examples_per_sec'])}  ({per['synthetic'] or '-'} per device)",
        f"real data  {_rate(result['real_examples_per_sec'])}  ({per['real'] or '-'} per device)"
        + (f", {100 * result['real_vs_synthetic']:.0f}% of synthetic" if result["real_vs_synthetic"] else ""),
    ]
    wait = result["input_wait_fraction"]
    if wait is not None:
        lines.append(f"input wait {100 * wait:.0f}% of the real run's step time: {result['bound']}-bound")
    ref = result["reference"]
    if ref:
        line = (
            f"reference  {ref['examples_per_sec_per_device']:,.0f} examples/s per "
            f"{ref['accelerator']} ({ref['setup']})"
        )
        if ref["real_vs_reference"] is not None:
            line += (
                f": synthetic {100 * ref['synthetic_vs_reference']:.0f}%, "
                f"real {100 * ref['real_vs_reference']:.0f}% of it"
            )
        lines += [line, f"           source: {ref['source']}"]
    cost = _cost_line(result.get("cost_per_epoch"))
    if cost:
        lines.append(cost)
    lines += [f"note       {n}" for n in result["notes"]]
    if result.get("idempotency_key"):
        lines.append(
            f"key        {result['idempotency_key']} (bench again with --idempotency-key "
            f"{result['idempotency_key']} to adopt these jobs, not create new ones)"
        )
    return "\n".join(lines)


def dry_run_text(result: dict[str, Any]) -> str:
    """`bench --dry-run` for people: each of the two jobs as `submit --dry-run` describes it (its
    image or package, its create request), then the key the jobs would carry."""
    where = "this machine (submit --local)" if result["local"] else "Vertex AI"
    lines = [
        f"# dry run: nothing was sent, built or run. bench would run two jobs of "
        f"{result['steps']} steps ({result['steps_per_execution']} per execution) on {where}:"
    ]
    lines += [f"# note: {n}" for n in result["notes"]]
    for kind, run in result["runs"].items():
        lines.append(f"# {kind} data:" + (f" image {run['image']}" if run.get("image") else ""))
        if run["package"]:
            lines.append(f"#   package first: {run['package']['target']} (if it does not exist yet)")
        for request in run["requests"]:
            if request.get("method") == "POST":  # the create; the lookup before it is a GET
                lines.append(f"{request['method']} {request['url']}")
                lines.append(json.dumps(request["body"], indent=2))
    if result["idempotency_key"]:
        lines.append(
            f"# key {result['idempotency_key']} (the jobs' keys: "
            f"{result['idempotency_key']}-bench-syn, -bench-real)"
        )
    return "\n".join(lines)


def _share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def sweep_text(result: dict[str, Any]) -> str:
    """`bench --sweep` for people: one line per value (examples/s, input wait, host overhead;
    "-" where the trainer wrote no such figure), then the recommendation and its rule."""
    field = result["field"]
    data = "synthetic data" if result.get("synthetic_data") else "the spec's data"
    lines = [
        f"sweep      {result['spec']} on {result['hardware']}: {result['model']} {result['image_size']} px, "
        f"{field}, {result['steps']} steps per run on {data}"
        + (f", {result['repeat']} runs per value (medians)" if result.get("repeat", 1) > 1 else ""),
    ]
    each = result.get("repeat", 1) > 1
    batch = field == "batch_size"
    header = [
        "value",
        "steps/exec",
        "batch",
        *(["peak lr"] if batch else []),
        "examples/s",
        "input wait",
        "host overhead",
        *(["each run (examples/s)"] if each else []),
    ]
    table = [header]
    for row in result["rows"]:
        table.append(
            [
                row["value"],
                str(row["steps_per_execution"]),
                str(row["batch_size"]),
                *([f"{row['peak_learning_rate']:g}"] if batch else []),
                f"{row['examples_per_sec']:,.0f}" if row["examples_per_sec"] else "-",
                _share(row["input_wait_fraction"]),
                _share(row["host_overhead_fraction"]),
                *([" ".join(f"{r['examples_per_sec'] or 0:,.0f}" for r in row["runs"])] if each else []),
            ]
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines += [
        "  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in table
    ]
    rec = result["recommendation"]
    if rec:
        best = (
            ""
            if rec["value"] == rec["best_value"]
            else f"; the best, {rec['best_value']}, ran {rec['best_examples_per_sec']:,.0f}"
        )
        lines.append(
            f"recommend  {field}: {rec['value']} ({rec['examples_per_sec']:,.0f} examples/s, "
            f"{100 * rec['of_best']:.0f}% of the best rate{best}): {rec['rule']}"
        )
    else:
        lines.append("recommend  none: no run measured a rate")
    lines += [f"note       {n}" for n in result["notes"]]
    if result.get("idempotency_key"):
        lines.append(
            f"key        {result['idempotency_key']} (sweep again with --idempotency-key "
            f"{result['idempotency_key']} to adopt these jobs, not create new ones)"
        )
    return "\n".join(lines)


def sweep_dry_run_text(result: dict[str, Any]) -> str:
    """`bench --sweep ... --dry-run` for people: each value's job as `submit --dry-run`
    describes it, then the keys the jobs would carry."""
    where = "this machine (submit --local)" if result["local"] else "Vertex AI"
    lines = [
        f"# dry run: nothing was sent, built or run. bench --sweep would run {len(result['order'])} jobs "
        f"of {result['steps']} steps, one per {result['field']}, on {where}:"
    ]
    if result.get("repeat", 1) > 1:
        lines.append(f"# each value {result['repeat']} times, in this order: {', '.join(result['order'])}")
    lines += [f"# note: {n}" for n in result["notes"]]
    for value, run in result["runs"].items():
        v = result["values"][value]
        lines.append(
            f"# {result['field']}={value}: {v['steps_per_execution']} steps per execution, batch "
            f"{v['batch_size']}, peak learning rate {v['peak_learning_rate']:g}"
            + (f", image {run['image']}" if run.get("image") else "")
        )
        for request in run["requests"]:
            if request.get("method") == "POST":
                lines.append(f"{request['method']} {request['url']}")
                lines.append(json.dumps(request["body"], indent=2))
            if request.get("local"):  # a local run: the trainer's arguments, what differs between values
                for pool in request["body"]["jobSpec"]["workerPoolSpecs"]:
                    lines.append("#   trainer " + " ".join(pool["containerSpec"].get("args", [])))
    if result["idempotency_key"]:
        lines.append(
            f"# key {result['idempotency_key']} (the jobs' keys: "
            f"{result['idempotency_key']}-sweep-0, -1, ...)"
        )
    return "\n".join(lines)
