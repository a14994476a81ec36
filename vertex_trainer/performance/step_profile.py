"""`vertex-trainer profile`: where a run's step time goes, read from TensorFlow's profiler trace.

The bundled trainer's `trainer.profile_steps: "A,B"` (or any TensorFlow profiler session: Keras'
TensorBoard(profile_batch=...), tf.profiler.experimental.start/stop) leaves one XSpace per host in
the run's TensorBoard folder:

    <run's TensorBoard dir>/plugins/profile/<session: YYYY_MM_DD_HH_MM_SS>/<host>.xplane.pb

`find_local` / `find_gcs` (profile_trace.py) find the newest session below a local folder or a gs:// prefix;
`read` copies them into a scratch folder (xprof writes its caches beside a trace; a run's folder
is left as it was) and reads them with xprof's own converters (`xspace_to_tool_data`, the code
behind TensorBoard's Profile tab; `lazy`: the `profile` extra): the input-pipeline analyzer's
step-time table (per step: device compute, input, idle, ...) and the framework op statistics (the
top ops by self time). No protobuf is parsed here: only xprof's JSON tables.

How xprof's step-time columns are grouped (xprof/convert/op_stats_to_input_pipeline_analysis.cc):

* compute, "device busy": device compute (GPU; the host's own ops on a CPU-only trace, where the
  host is the device); TensorCore and SparseCore compute (TPU);
* host, "idle between steps": the step's time that is neither compute, input, output nor
  compilation: xprof's "All others" and "Kernel launch" (GPU: Python, Keras' callbacks and the
  dispatch of the next execution) and TensorCore idle (TPU: waiting for the host, not for
  input). This is the host round trip a larger steps_per_execution removes. On a CPU-only trace
  xprof's table counts every thread's op time (the input pipeline's beside the model's), so
  there it is measured from the trace's events instead (`between_executions`: the steps' wall
  time outside the training function, and the loop between them);
* input: waiting for data (on GPUs xprof's "Input" includes the host-to-device copies);
* transfer: host-to-device transfers (TPU: host send/recv; GPU: the device's MemcpyHToD ops,
  also counted in input);
* communication, output, compile and the host's own ops on a GPU: each its own line.

Keras 3 marks its profiled executions "Profiled batch", which xprof's step table does not take
as steps: there the trace's events give the host between executions and the executions (not
split into compute and input), and the verdict says only whether the run is host-bound.

The verdict uses the trainer's words (trainer/throughput.py `verdict`): host-bound, input-bound or
compute-bound, with the measured share and what to try.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from vertex_trainer import lazy
from vertex_trainer.errors import UserError
from vertex_trainer.performance.profile_trace import (
    NO_TRACE_HINT,
    Trace,
    fetch,
    find_gcs,
    find_local,
    no_trace,
    run_config,
)
from vertex_trainer.settings import Settings

__all__ = [
    "HOST_BOUND",
    "INPUT_BOUND",
    "NO_TRACE_HINT",
    "Category",
    "Op",
    "Profile",
    "Trace",
    "between_executions",
    "breakdown",
    "find_gcs",
    "find_local",
    "measured_host",
    "no_trace",
    "read",
    "run_config",
    "steps_per_execution_for",
    "verdict",
]

# The trainer's thresholds (trainer/throughput.py; tests/profile checks they stay equal): waiting
# for data at least this share of the step time is input-bound; the host between executions at
# least this share is host-bound.
INPUT_BOUND = 0.10
HOST_BOUND = 0.10
HOST_TARGET = 0.05  # the share of host round trips the recommended steps_per_execution brings them to
TOP_OPS = 10
_STEP_NUMBER = re.compile(r"(\d+)\s*$")
# The training function's name in a trace: tf-keras's, Keras 3's (one step, or several a call).
EXECUTIONS = frozenset({"train_function", "one_step_on_iterator", "multi_step_on_iterator"})
# Keras 3's TensorBoard callback marks each profiled execution so; xprof's step table skips them.
BATCH_MARKER = "Profiled batch"

# xprof's step-time columns (ids lowercased) -> our category. The generic table (CPU, GPU) and the
# TPU table (op_stats_to_input_pipeline_analysis.cc); a column not named here is "other".
_COLUMNS = {
    "devicecomputetimems": "compute",
    "devicetodevicetimems": "communication",
    "devicecollectivestimems": "communication",
    "hostcomputetimems": "host_compute",  # compute on a CPU-only trace
    "kernellaunchtimems": "host",
    "othertimems": "host",
    "infeedtimems": "input",
    "outfeedtimems": "output",
    "compiletimems": "compile",
    "tccomputetimems": "compute",
    "scv0computetimems": "compute",
    "tcidletimems": "host",
    "tcinfeedtimems": "input",
    "scv0infeedtimems": "input",
    "tcoutfeedtimems": "output",
    "hosttransfertimems": "transfer",
}
_NOT_TIME = {"stepnum", "tooltip", "steptimems", "infeedpercentaverage", "noninfeedtimems"}
LABELS = {
    "compute": "device busy (compute)",
    "host": "idle between steps (host round trips)",
    "input": "input (waiting for data)",
    "transfer": "host-to-device transfers",
    "communication": "device to device, collectives",
    "host_compute": "host compute (ops on the host)",
    "execution": "executing the training function (compute and input)",
    "output": "output (device to host)",
    "compile": "compilation",
    "other": "other",
}
_ORDER = tuple(LABELS)


@dataclass(frozen=True)
class Category:
    """One line of the breakdown: an average per profiled step and its share of the step time."""

    name: str
    label: str
    ms_per_step: float
    fraction: float


@dataclass(frozen=True)
class Op:
    """One op of the top ops by self time (on the device, or the host for a CPU-only trace)."""

    name: str
    type: str
    where: str
    occurrences: int
    self_ms: float
    fraction: float  # of the self time of every op on the same side (idle left out)


@dataclass(frozen=True)
class Profile:
    """What `profile RUN` shows: the session read, the step breakdown, the top ops, the verdict."""

    source: str
    trace: Trace
    hardware: str | None
    steps: int
    step_names: tuple[str, ...]
    step_time_ms: float | None
    steps_per_execution: int | None
    breakdown: tuple[Category, ...]
    top_ops: tuple[Op, ...]
    verdict: str | None
    bound: str | None  # host | input | compute; None without steps
    notes: tuple[str, ...] = field(default=())

    def share(self, name: str) -> float:
        """The step-time share of one category (0 when absent)."""
        return sum(c.fraction for c in self.breakdown if c.name == name)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`profile --output json`)."""
        out = asdict(self)
        out["trace"] = {**asdict(self.trace), "hosts": self.trace.hosts}
        return out


@contextmanager
def _quiet_stderr() -> Iterator[list[str]]:
    """xprof's converters log on the process's stderr (file descriptor 2) from C++: what they
    write is kept aside (the list's one item, after the block), not shown."""
    sys.stderr.flush()
    saved = os.dup(2)
    kept: list[str] = []
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield kept
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            kept.append(sink.read()[-4000:].decode("utf-8", "replace"))


def _converter() -> Any:
    """xprof's converter module (exit 2 naming the `profile` extra when xprof is missing)."""
    return lazy.require("xprof.convert.raw_to_tool_data")


def _tool(paths: Sequence[str], tool: str) -> Any:
    """One of xprof's tools over the trace, as the JSON its converter returns."""
    convert = _converter()
    with _quiet_stderr() as log:
        data, _ = convert.xspace_to_tool_data(list(paths), tool, {"use_saved_result": False})
    if not data:
        raise UserError(
            f"profile: xprof could not read the trace ({tool})",
            hint=(log[0].strip().splitlines() or ["no message"])[-1],
        )
    return json.loads(data)


def _cells(table: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A gviz table's rows as {column id: value}."""
    ids = [str(c.get("id", "")) for c in table.get("cols", [])]
    return [
        {ids[i]: cell.get("v") if isinstance(cell, dict) else None for i, cell in enumerate(row.get("c", []))}
        for row in table.get("rows", [])
    ]


def _step_table(tables: Any) -> Mapping[str, Any] | None:
    for table in tables if isinstance(tables, list) else []:
        ids = {str(c.get("id", "")).lower() for c in table.get("cols", [])}
        if "stepnum" in ids and table.get("rows"):
            found: Mapping[str, Any] = table  # (xprof's JSON: a table is an object)
            return found
    return None


def breakdown(table: Mapping[str, Any]) -> tuple[list[str], float | None, list[Category], str | None]:
    """The step names, the mean step time (ms) and the categories of an input-pipeline step table
    (xprof's gviz JSON), and its hardware type.

    Args:
        table: the table whose columns are stepnum, ...TimeMs, (tooltip, stepTimeMs).
    Returns:
        (step names, mean step ms or None, categories in LABELS' order with a share > 0, hardware).
    """
    rows = _cells(table)
    hardware = (table.get("p") or {}).get("hardware_type")
    cpu_only = hardware == "CPU_ONLY"
    totals: dict[str, float] = {}
    step_total = 0.0
    for row in rows:
        parts = 0.0
        for key, value in row.items():
            low = key.lower()
            if low in _NOT_TIME or not isinstance(value, int | float):
                continue
            name = _COLUMNS.get(low, "other")
            if name == "host_compute" and cpu_only:
                name = "compute"
            totals[name] = totals.get(name, 0.0) + float(value)
            parts += float(value)
        given = row.get("stepTimeMs")
        step_total += float(given) if isinstance(given, int | float) and given > 0 else parts
    names = [str(row.get("stepnum", "")) for row in rows]
    if not rows or step_total <= 0:
        return names, None, [], hardware
    counted = sum(totals.values())
    if step_total > counted:  # the step's time no column accounts for
        totals["other"] = totals.get("other", 0.0) + step_total - counted
    steps = len(rows)
    cats = [
        Category(name, LABELS[name], round(totals[name] / steps, 4), round(totals[name] / step_total, 4))
        for name in _ORDER
        if totals.get(name, 0.0) / step_total >= 0.0005  # what rounds to 0.0% is left out
    ]
    return names, round(step_total / steps, 4), cats, hardware


def top_ops(tables: Any, limit: int = TOP_OPS) -> tuple[list[Op], float]:
    """The ops with the most self time (xprof's framework op statistics), on the device when the
    trace has device ops, else on the host; idle left out. Also the device's MemcpyHToD time (us).
    """
    table = tables[0] if isinstance(tables, list) and tables else {}
    rows = [r for r in _cells(table) if str(r.get("type", "")).upper() != "IDLE"]
    device = [r for r in rows if r.get("host_or_device") == "Device"]
    chosen = device or rows
    h2d_us = sum(float(r.get("total_self_time") or 0) for r in device if r.get("type") == "MemcpyHToD")
    total = sum(float(r.get("total_self_time") or 0) for r in chosen)
    chosen.sort(key=lambda r: float(r.get("total_self_time") or 0), reverse=True)
    ops = [
        Op(
            name=str(r.get("operation", "")),
            type=str(r.get("type", "")),
            where=str(r.get("host_or_device", "")),
            occurrences=int(r.get("occurrences") or 0),
            self_ms=round(float(r.get("total_self_time") or 0) / 1000, 4),
            fraction=round(float(r.get("total_self_time") or 0) / total, 4) if total else 0.0,
        )
        for r in chosen[:limit]
    ]
    return ops, h2d_us


def between_executions(
    events: Sequence[Mapping[str, Any]], names: Sequence[str]
) -> tuple[float, float] | None:
    """(the profiled steps' wall time, the part of it outside the training function), in ms, from
    the trace's events (xprof's trace viewer): each step marker's time less the executions inside
    it (Keras' callbacks, its Python loop, the dispatch), plus the gaps between consecutive steps
    of one epoch. None when the trace has no step marker or no execution inside one."""
    wanted = set(names)
    steps = sorted(
        (e for e in events if e.get("ph") == "X" and e.get("name") in wanted and e.get("dur")),
        key=lambda e: float(e["ts"]),
    )
    if not steps:
        return None
    where = (steps[0].get("pid"), steps[0].get("tid"))
    runs = [
        e
        for e in events
        if e.get("ph") == "X" and e.get("name") in EXECUTIONS and (e.get("pid"), e.get("tid")) == where
    ]
    window = inside = 0.0
    for n, step in enumerate(steps):
        start, end = float(step["ts"]), float(step["ts"]) + float(step["dur"])
        window += end - start
        inside += sum(float(e.get("dur") or 0) for e in runs if start <= float(e["ts"]) <= end)
        later = steps[n + 1] if n + 1 < len(steps) else None
        epoch = (step.get("args") or {}).get("epoch_num")
        if later is not None and (later.get("args") or {}).get("epoch_num") == epoch:
            window += max(0.0, float(later["ts"]) - end)  # the loop between two steps of an epoch
    if inside <= 0 or window <= 0:
        return None
    return window / 1000, max(0.0, window - inside) / 1000


def measured_host(
    cats: Sequence[Category], steps: int, window_ms: float, outside_ms: float
) -> list[Category]:
    """A CPU-only trace's categories with the host between executions measured (`between_executions`)
    instead of xprof's "All others": there the host is the device, and xprof attributes the op time
    of every thread (the input pipeline's beside the model's) to the step's categories. The rest of
    the window is shared among xprof's other categories in their ratio."""
    host = min(1.0, outside_ms / window_ms)
    rest = [c for c in cats if c.name != "host"]
    total = sum(c.fraction for c in rest)
    step_ms = window_ms / steps
    shares = {"host": host} | {c.name: (1 - host) * c.fraction / total for c in rest if total > 0}
    return [
        Category(name, LABELS[name], round(shares[name] * step_ms, 4), round(shares[name], 4))
        for name in _ORDER
        if shares.get(name, 0.0) >= 0.0005
    ]


def _batches(paths: Sequence[str]) -> tuple[list[str], float, list[Category]] | None:
    """Keras 3's profiled batches from the trace's events: their names, the mean wall time (ms)
    and the split into the host between executions and the executions; None without them."""
    events = _tool(paths, "trace_viewer").get("traceEvents") or []
    measured = between_executions(events, [BATCH_MARKER])
    if not measured:
        return None
    found = sorted(
        int(n)
        for e in events
        if e.get("ph") == "X"
        and e.get("name") == BATCH_MARKER
        and str(n := (e.get("args") or {}).get("step_num", "")).isdigit()
    )
    window, outside = measured
    names = [f"{BATCH_MARKER} {n}" for n in found] or [BATCH_MARKER]
    step_ms = window / len(names)
    host = min(1.0, outside / window)
    cats = [
        Category(name, LABELS[name], round(share * step_ms, 4), round(share, 4))
        for name, share in (("execution", 1 - host), ("host", host))
        if share >= 0.0005
    ]
    return names, round(step_ms, 4), cats


def steps_per_execution(names: Sequence[str]) -> int | None:
    """Keras names each profiled execution after its first step ("train 32"): the common
    difference of consecutive numbers is the steps per execution (None with fewer than two)."""
    numbers = [int(m.group(1)) for m in map(_STEP_NUMBER.search, names) if m]
    gaps = {b - a for a, b in pairwise(numbers)}
    return gaps.pop() if len(gaps) == 1 and min(gaps) > 0 else None


def steps_per_execution_for(fraction: float, steps_per_execution: int, target: float = HOST_TARGET) -> int:
    """The steps_per_execution (a power of two) at which host round trips that took `fraction`
    of the time at `steps_per_execution` take at most `target` of it (the trainer's own rule,
    trainer/throughput.py; tests/profile checks they agree): a round trip costs the same per
    execution, so with r = spe * f / (1 - f) the share at n steps is r / (r + n)."""
    if fraction >= 1.0:
        return 2 * max(1, steps_per_execution)
    ratio = steps_per_execution * fraction / (1.0 - fraction)
    needed = max(1.0, ratio * (1.0 - target) / target)
    return 1 << math.ceil(math.log2(needed))


def _host_fix(host: float, spe: int | None, epoch: int | None) -> str:
    """What the host-bound verdict recommends, in the trainer's words (throughput.host_clause)."""
    if not spe:
        return "use trainer.steps_per_execution: 0 (auto) or more steps per execution"
    # (spec.trainer loads the spec's pydantic models; `profile` reads a trace without them)
    from vertex_trainer.spec.trainer import choose_steps_per_execution

    needed = steps_per_execution_for(host, spe)
    auto = f" (auto: {choose_steps_per_execution(epoch, 0)[0]} here)" if epoch else " (auto)"
    if epoch and needed > epoch:
        return (
            f"the round trip outweighs the steps even at {needed} per execution: use "
            f"trainer.steps_per_execution: {epoch} (the whole epoch) and fewer, longer epochs"
        )
    return f"use trainer.steps_per_execution: 0{auto} or >= {needed}"


def verdict(
    cats: Sequence[Category], spe: int | None, steps_per_epoch: int | None = None
) -> tuple[str | None, str | None]:
    """(bound, the verdict line) in the trainer's words (trainer/throughput.py `bound` and
    `host_clause`): host-bound when the host between executions takes at least HOST_BOUND of the
    step time and no less than input, else input-bound at INPUT_BOUND, else compute-bound;
    (None, None) without steps."""
    if not cats:
        return None, None
    share = {c.name: c.fraction for c in cats}
    host, waiting, busy = share.get("host", 0.0), share.get("input", 0.0), share.get("compute", 0.0)
    data = f"{100 * waiting:.0f}% of the time waiting for data"
    if host >= HOST_BOUND and host >= waiting:
        at = f" at steps_per_execution={spe}" if spe else ""
        fix = _host_fix(host, spe, steps_per_epoch)
        return "host", f"host-bound: {100 * host:.0f}% of the time between executions{at}: {fix}"
    between = f", {100 * host:.0f}% between executions"
    if "execution" in share:  # Keras 3's batches: no split of the execution into compute and input
        return None, (
            f"not host-bound: {100 * host:.0f}% of the time between executions; the rest executes "
            "the training function (xprof splits compute from input only at tf-keras' steps)"
        )
    if waiting >= INPUT_BOUND:
        return "input", (
            f"input-bound: {data}{between}: try a machine type with more vCPUs, or "
            "--read-parallelism/--data-threads"
        )
    return "compute", f"compute-bound: {data}{between}; the device is busy {100 * busy:.0f}% of the step time"


def read(
    trace: Trace,
    *,
    source: str,
    settings: Settings | None = None,
    config: Mapping[str, Any] | None = None,
) -> Profile:
    """Read a profiler session with xprof's converters into a Profile.

    Args:
        trace: the session (find_local / find_gcs).
        source: what the person named (shown back).
        settings: the process settings (needed for a gs:// trace).
        config: the run's trainer_config.json (`run_config`): its steps_per_execution (else read
            off the profiled steps' numbers) and steps_per_epoch, for the verdict's fix.
    Returns:
        the Profile.
    """
    notes: list[str] = []
    _converter()  # a missing extra is said before anything is copied
    with tempfile.TemporaryDirectory(prefix="vertex-trainer-profile-") as scratch:
        paths = fetch(trace, Path(scratch), settings)
        table = _step_table(_tool(paths, "input_pipeline_analyzer"))
        ops, h2d_us = top_ops(_tool(paths, "framework_op_stats"))
        names, step_ms, cats, hardware = breakdown(table) if table else ([], None, [], None)
        marked = None if names else _batches(paths[:1])
        if hardware == "CPU_ONLY" and names:  # the chief's events: the trace viewer reads one host
            events = _tool(paths[:1], "trace_viewer").get("traceEvents") or []
            measured = between_executions(events, names)
            if measured:
                cats = measured_host(cats, len(names), *measured)
                step_ms = round(measured[0] / len(names), 4)
                notes.append(
                    "CPU only: idle between steps is the steps' wall time outside the training "
                    "function (callbacks, the Python loop, dispatch), measured from the trace's events"
                )
    if not names and not ops:
        raise UserError(
            f"profile: the trace in {trace.folder} holds no step and no op: the profiler captured nothing",
            hint=NO_TRACE_HINT,
        )
    if not names and marked:
        names, step_ms, cats = marked
        notes.append(
            "xprof's step table has no step (Keras 3 marks profiled batches only): the time is "
            "split from the trace's events into executing the training function and the host "
            "between executions"
        )
    if not names:
        notes.append(
            "xprof found no training step in the trace (no step markers): the breakdown needs "
            "steps of Keras' fit(); the top ops are below"
        )
    if h2d_us and names and not any(c.name == "transfer" for c in cats):
        per_step = h2d_us / 1000 / len(names)
        step = step_ms or 0.0
        notes.append(
            f"host-to-device transfers: {per_step:.2f} ms a step on the device (MemcpyHToD), "
            "counted in input above" + (f" ({100 * per_step / step:.0f}% of the step)" if step else "")
        )
    config = config or {}
    given, epoch = config.get("steps_per_execution"), config.get("steps_per_epoch")
    spe = given if isinstance(given, int) and given > 0 else steps_per_execution(names)
    bound, line = verdict(cats, spe, epoch if isinstance(epoch, int) and epoch > 0 else None)
    return Profile(
        source=source,
        trace=trace,
        hardware=hardware,
        steps=len(names),
        step_names=tuple(names),
        step_time_ms=step_ms,
        steps_per_execution=spe,
        breakdown=tuple(cats),
        top_ops=tuple(ops),
        verdict=line,
        bound=bound,
        notes=tuple(notes),
    )
