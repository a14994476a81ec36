"""The submit plan for people (docs/contract.md sections 2, 8, 10 and 12): what `submit --dry-run`
prints and what `validate` shows, both read from the one typed plan (api.SubmitPlan), and the
quota lines of `validate --check-quota`. Only words here: the plan made every decision."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from vertex_trainer import hardware as hw
from vertex_trainer.cost.cost_text import price_line
from vertex_trainer.durations import fmt_duration
from vertex_trainer.redact import hidden, note, redact, redact_args
from vertex_trainer.spec.factory import keras_words
from vertex_trainer.spec.tune import Search, trial_count

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.api.plan import QuotaLook, SubmitPlan
    from vertex_trainer.spec import JobSpec

__all__ = ["dry_run_text", "quota_lines", "search_line", "validate_text"]


def dry_run_text(plan: SubmitPlan) -> str:
    """`submit --dry-run`: the steps submit would take, the exact requests with the body, each
    fallback attempt, the deploy's requests and the prices (a cloud job). Env values and flags
    whose names look secret are `***`, said in a line under the first (vertex_trainer/redact.py)."""
    if plan.kind in ("tuning", "local-tuning"):
        lines = _tuning_dry_run(plan)
    elif plan.local:
        lines = [
            "# dry run: nothing runs. submit --local would run this CustomJob on this machine:",
            json.dumps(redact(plan.body), indent=2),
        ]
    else:
        lines = _custom_dry_run(plan)
    if plan.deploy is not None:  # --deploy: what the deploy after the job would send
        from vertex_trainer.deployment.deploy_text import dry_run_text as deploy_text

        lines.append(deploy_text(redact(plan.deploy)))
    if plan.estimate is not None:  # hourly and worst case per attempt (docs/contract.md section 12)
        lines.append(f"# {price_line(plan.estimate)}")
        search = search_line(plan)
        if search:
            lines.append(f"# {search}")
    names = hidden([plan.job, plan.deploy, [{"args": t.args} for t in plan.trials]])
    if names:
        lines.insert(1, f"# {note(names)}")
    return "\n".join(lines)


def _custom_dry_run(plan: SubmitPlan) -> list[str]:
    lookup, create, after = plan.requests
    lines = ["# dry run: nothing was sent, built or run. submit would:"]
    steps = iter(range(1, 7))
    lines += _check_lines(plan, next(steps) if plan.checks else 0)
    lines += _tensorboard_lines(plan, next(steps) if plan.tensorboards else 0)
    pkg = plan.package
    if pkg:
        how = f"build it with {pkg['builder']}" if pkg["kind"] == "image" else "upload the sdist"
        lines.append(f"# {next(steps)}. package: if {pkg['target']} does not exist yet, {how}")
        lines.append(f"#    (context: {pkg['files']} files, {pkg['bytes']:,} bytes, {pkg['context_hash']})")
        if pkg.get("dependencies_from"):  # image.code is a package of its own (setup.py ...)
            deps = ", ".join(pkg["dependencies"]) or "none"
            lines.append(f"#    (its dependencies, from {pkg['dependencies_from']}: {deps})")
    lines.append(f"# {next(steps)}. look for a job already created with idempotency key {plan.key}")
    lines.append(f"{lookup['method']} {lookup['url']}?{urlencode(lookup['params'])}")
    lines.append(f"# {next(steps)}. if there is none, create it")
    if plan.image:
        code = plan.spec.image.code if plan.spec.image is not None else None
        lines.append(f"#    image: {plan.image}" + (f" (with image.code {code})" if code else ""))
    lines.append(f"#    output: {_output_words(plan)}")
    lines += _reducer_lines(plan.spec, "#    reducers (workerPoolSpecs[2], Reduction Server): ")
    lines.append(f"{create['method']} {create['url']}")
    lines.append(json.dumps(redact(create["body"]), indent=2))
    lines += _after_lines(next(steps), "job", after)
    later = plan.attempts[1:] if plan.kind == "fallback" else ()
    if later:  # scheduling.fallback (docs/contract.md section 11)
        lines.append(
            "# then each attempt below, only if the one before it is refused: its create for quota "
            "or as not offered there, or its job for capacity (code 8: seen with --wait)"
        )
    for attempt in later:
        a, post = attempt.planned, attempt.requests[1]
        lines.append(f"# attempt {a.n} ({a.strategy} in {a.region} on {a.hardware_name}), its own job")
        lines.append(f"{post['method']} {post['url']}")
    return lines


def _tuning_dry_run(plan: SubmitPlan) -> list[str]:
    if plan.local:
        lines = [
            "# dry run: nothing runs. submit --local would run these trials on this machine, each "
            "the CustomJob of the tuning job's trialJobSpec with its flags appended:"
        ]
        lines += [f"#   trial {t.id}: {' '.join(redact_args(t.args))}" for t in plan.trials]
        lines.append(json.dumps(redact(plan.job), indent=2))
        return lines
    lookup, create, after = plan.requests
    lines = ["# dry run: nothing was sent, built or run. submit would:"]
    step = 1
    if plan.checks:
        lines += _check_lines(plan, step)
        step += 1
    if plan.tensorboards:
        lines += _tensorboard_lines(plan, step)
        step += 1
    pkg = plan.package
    if pkg:
        how = f"build it with {pkg['builder']}" if pkg["kind"] == "image" else "upload the sdist"
        lines.append(f"# {step}. package: if {pkg['target']} does not exist yet, {how}")
        step += 1
    lines.append(f"# {step}. look for a tuning job already created with idempotency key {plan.key}")
    lines.append(f"{lookup['method']} {lookup['url']}?{urlencode(lookup['params'])}")
    lines.append(f"# {step + 1}. if there is none, create it")
    lines.append(f"{create['method']} {create['url']}")
    lines.append(json.dumps(redact(create["body"]), indent=2))
    return lines + _after_lines(step + 2, "tuning job", after)


def _after_lines(step: int, what: str, after: dict[str, Any]) -> list[str]:
    """The look after a create (vertex/custom_jobs.py `_keep_oldest`), as step `step`."""
    return [
        f"# {step}. look again: if another submit with the same key created a {what} at the same "
        "instant, the newer is cancelled (queued: nothing ran) and the oldest adopted",
        f"{after['method']} {after['url']}?{urlencode(after['params'])}",
    ]


def _check_lines(plan: SubmitPlan, step: int) -> list[str]:
    """The data checks a cloud submit makes first (preflight.py), as step `step`."""
    if not plan.checks:
        return []
    return [
        f"# {step}. check the data: list each pattern's prefix (a match ends it); one that matches "
        "no object stops the submit (exit 2), nothing built or created",
        *(f"#    would check: {c.describe()}" for c in plan.checks),
    ]


def _tensorboard_lines(plan: SubmitPlan, step: int) -> list[str]:
    """`tensorboard: auto` (vertex/tensorboards.py): each region's find-or-create, as step `step`;
    the job's `tensorboard` field holds the placeholder until then."""
    if not plan.tensorboards:
        return []
    lines = [
        f"# {step}. find or create the TensorBoard instance (tensorboard: auto); the job's "
        "tensorboard field gets its name"
    ]
    for board in plan.tensorboards:
        find, create = board.requests
        lines.append(f"#    {board.describe()}")
        lines.append(f"{find['method']} {find['url']}?{urlencode(find['params'])}")
        lines.append(f"{create['method']} {create['url']}  {json.dumps(create['body'])}")
    return lines


def _tensorboard_words(plan: SubmitPlan) -> str:
    """The spec's TensorBoard as validate says it: the instance, or auto's find-or-make."""
    if plan.spec.tensorboard != "auto":
        return str(plan.spec.tensorboard)
    if plan.local:
        return "auto (not used by a run here)"
    places = ", ".join(b.region for b in plan.tensorboards)
    return f"auto: the instance labelled vertex-trainer-managed=true in {places}, found or made at submit"


def search_line(plan: SubmitPlan) -> str | None:
    """A tuning job's whole worst case: 'search: up to 8 trials, worst case 12.34 USD (8 x one
    trial's)'; None for other kinds."""
    trials = trial_count(plan.spec)  # max_trials, or a grid's combinations when fewer
    if trials is None or plan.local:
        return None
    if plan.worst_case is None:
        return f"search: up to {trials} trials, worst case unknown (a price is missing)"
    le = "at most " if plan.estimate and any(a.upper_bound for a in plan.estimate.attempts) else ""
    return (
        f"search: up to {trials} trials, worst case {le}{plan.worst_case:,.2f} USD ({trials} x one trial's)"
    )


def _output_words(plan: SubmitPlan, planned: bool = False) -> str:
    """Where the run writes (docs/contract.md section 15): its own folder below output_dir
    (`planned`: validate, which submits nothing: the folder's form, not a key's)."""
    spec = plan.spec
    if plan.output is None:
        return "(no output_dir: a run here writes below the temp dir)" if plan.local else "(no output_dir)"
    if plan.resumed is not None:
        return f"{plan.output} (continuing that run, --resume)"
    if spec.fixed_output_dir:
        return f"{plan.output} (fixed_output_dir: every submission writes here)"
    if planned and spec.output_dir:
        return (
            f"{spec.output_dir.rstrip('/')}/{spec.name}-<key or UTC time>/ (each submission its own folder)"
        )
    return f"{plan.output} (this submission's own folder; the next one gets its own)"


def validate_text(plan: SubmitPlan, path: object, quota: list[str] | None = None) -> str:
    """`validate`: OK and what the plan runs: where, hardware, schedule (and the fallback's
    attempts), image, trainer, the price (a cloud job; a tuning job's whole search too) and the
    tuning study."""
    job = plan.spec
    s = job.scheduling
    wait = f", max wait {fmt_duration(s.max_wait)}" if s.max_wait is not None else ""
    if s.max_wait is not None and not s.max_wait:  # "0s" reads as "no wait": it is the opposite
        wait = ", max wait 0 (none: it waits for capacity for as long as it takes, then bills from its start)"
    if wait and any("max_wait is ignored" in w for w in plan.warnings):
        wait += " (ignored: no flex-start in the plan)"
    preset = f"{job.hardware.preset}: " if job.hardware.preset else ""
    if job.image is None:
        image = "(none: --local only)"
    elif plan.package:  # the exact tag (or package) submit runs, built or uploaded only when missing
        made = "built" if plan.package["kind"] == "image" else "uploaded"
        image = f"{plan.package['target']} ({made} by submit if missing)"
    elif not (job.image.uri or job.image.builds):  # your own code, a spec for --local only
        image = "(none: --local only; a cloud job needs image.repository or image.python_package)"
    else:
        image = job.image.uri or job.image.repository or "python package"
    machines = _machines(job)
    lines = [
        f"OK  {path}: {job.name}" + (" (for --local)" if plan.local else ""),
        f"  where     {job.project or '(no project yet)'} / {job.region or '(no region yet)'}",
        f"  hardware  {preset}{machines}",
        *_reducer_lines(job, "  reducers  "),
        f"  schedule  {s.strategy}{wait}"
        + (f", timeout {fmt_duration(s.timeout)}" if s.timeout else "")
        + (f"; then {', then '.join(_fallback_words(plan))} if refused" if s.fallback else ""),
        f"  image     {image}",
        f"  output    {_output_words(plan, planned=True)}",
        f"  trainer   {job.trainer.model} on {job.trainer.train_data}"
        if job.trainer  # script jobs (issue 32): your own code and its args
        else f"  code      {_code(job)}".rstrip(),
    ]
    if not job.trainer and job.args:  # as a list: one argument may hold spaces ("--nnsize=32 8")
        lines.append(f"  args      {json.dumps(list(redact_args(job.args)))}")
    if job.trainer and job.image is not None and job.image.code:  # a model factory's directory
        keras = keras_words(job)  # the Keras that trains it (trainer.keras, or its imports)
        lines.append(f"  code      {job.image.code}" + (f", trained with {keras}" if keras else ""))
    if job.tensorboard:  # Vertex AI TensorBoard (auto: vertex/tensorboards.py, at submit)
        lines.append(f"  tensorboard {_tensorboard_words(plan)}")
    if plan.estimate is not None:  # hourly and worst case per attempt (docs/contract.md section 12)
        lines.append(f"  price     {price_line(plan.estimate).removeprefix('price: ')}")
        search = search_line(plan)
        if search:
            lines.append(f"  {search.replace('search: ', 'search    ', 1)}")
    if job.tune is not None:  # hyperparameter tuning (docs/contract.md section 10)
        t = job.tune
        size = Search.of(job).grid_size()
        of_grid = f": {t.max_trials} of its {size} combinations" if size and size > t.max_trials else ""
        if size is not None and size < t.max_trials:  # the service stops when each was tried
            of_grid = f": each of its {size} combinations once, under max_trials {t.max_trials}"
        lines.append(
            f"  tune      {t.goal} {t.metric} over {', '.join(t.parameters)}: {trial_count(job)} "
            f"trials, {t.parallel_trials} at a time ({t.algorithm} search{of_grid})"
        )
    return "\n".join(lines + list(quota or []))


def _machines(job: JobSpec) -> str:
    """The hardware line's machines, as Vertex AI counts them (a pool's replicaCount is machines):
    '2 machines (workerpool0: 1, workerpool1: 1) of a3-highgpu-8g with 8 x NVIDIA_H100_80GB each
    = 16 GPUs'; a TPU machine's chips (cores for a v2/v3 board); a multi-host TPU slice as its
    hosts, one replica on Vertex AI, every TPU VM of the topology billed ('4 machines of
    ct5lp-hightpu-4t in one TPU slice (topology 4x4) with 4 x TPU_V5_LITEPOD each = 16 TPU
    chips')."""
    h = job.hardware
    acc = h.accelerator
    s = hw.tpu_slice(h.machine_type, h.tpu_topology) if h.tpu_topology else None
    hosts = s.hosts if s is not None else 1
    count = job.replicas * hosts  # (a TPU job is one replica: spec/rules.py)
    text = _count(count, "machine")
    if job.replicas > 1:  # the chief's pool and the workers' (render.py)
        text += f" (workerpool0: 1, workerpool1: {job.replicas - 1})"
    text += f" of {h.machine_type}"
    if s is not None and hosts > 1:
        text += f" in one TPU slice (topology {s.topology})"
    if acc is None:
        return text
    total = job.total_devices
    per = total // count
    topology = f" (topology {h.tpu_topology})" if h.tpu_topology and hosts == 1 else ""
    noun = hw.device_noun(h.machine_type, h.accelerator_type)
    name = acc.name if acc.api_enum else acc.family  # (v5p, v6e: the machine type implies it)
    return f"{text} with {per} x {name}{topology}{' each' if count > 1 else ''} = {_count(total, noun)}"


def _count(n: int, noun: str) -> str:
    """'1 machine', '2 machines'."""
    return f"{n} {noun}" + ("s" if n != 1 else "")


def _reducer_lines(job: JobSpec, head: str) -> list[str]:
    """The Reduction Server line (docs/scaling.md), or none without scaling.reduction_server."""
    from vertex_trainer.spec.scaling import reducers

    r = reducers(job)
    return [] if r is None else [head + r.describe()]


def _code(job: JobSpec) -> str:
    """A script job's code (issue 32): image.code, else the image it runs."""
    if job.image is None:
        return ""
    image = job.image
    if image.code and (image.script or image.module):
        run = f"python {image.script}" if image.script else f"python -m {image.module}"
        return f"{image.code} ({run})"
    return image.code or image.uri or ""


def _fallback_words(plan: SubmitPlan) -> list[str]:
    """'spot', or 'spot in us-east5 on a100x8' for an attempt that moves (spec/attempts.py)."""
    from vertex_trainer.spec.attempts import attempts

    route = attempts(plan.spec)
    first = route[0]
    return [
        a.strategy
        + (f" in {a.region}" if a.region != first.region else "")
        + (f" on {a.hardware_name}" if a.hardware != first.hardware else "")
        + (f" (reservation {a.reservation})" if a.reservation and a.reservation != first.reservation else "")
        for a in route[1:]
    ]


def quota_lines(look: QuotaLook) -> list[str]:
    """`validate --check-quota`: a line per strategy of the plan, or why nothing was read."""
    why = {
        "offline": "not checked: Vertex AI is an emulator and VERTEX_TRAINER_QUOTAS_ENDPOINT is not set",
        "no-accelerator": "no accelerator: nothing to check",
        "no-place": "not checked: the spec has no project or region yet",
        "no-metric": f"not checked: no quota metric is known for {look.accelerator}",
    }
    if look.skipped:
        return [f"  quota     {why[look.skipped]}"]
    return [f"  quota     {c.describe(look.accelerator or '')}" for c in look.checks]
