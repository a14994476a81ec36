"""pipeline compile | submit | status | cancel: the job as a Vertex AI Pipelines run
(docs/contract.md section 6)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from vertex_trainer import api
from vertex_trainer.cli import common
from vertex_trainer.cli.common import JobPlace, OutputFormat, OutputOpt, SpecOptions, SpecPath
from vertex_trainer.contract import short_state
from vertex_trainer.errors import JobFailed, UserError
from vertex_trainer.redact import note

app = typer.Typer(
    help="The job as a Vertex AI Pipelines run: train on the spec's hardware (Flex Start "
    "included), then register and deploy the model when the spec has deploy:.",
    no_args_is_help=True,
)
RunArg = Annotated[str, common.resource_argument("a pipeline run", "pipelineJobs")]
KeyOpt = Annotated[
    str | None,
    common.idempotency_key_option(
        "reuse for retries: the run's pipelineJobId is derived from KEY, so a second "
        "submit with KEY adopts the run instead of starting another. Default: random"
    ),
]


@app.command("compile")
@common.with_option_groups
def compile_(
    spec: SpecPath,
    opts: SpecOptions,
    out: Annotated[
        Path | None, typer.Option("-o", "--out", help="write the pipeline here (default: stdout)")
    ] = None,
    resolve: Annotated[
        bool,
        typer.Option(
            "--resolve",
            help="look up the model and endpoint (read-only), as submit does; "
            "default: compile for a first deploy, no connection",
        ),
    ] = False,
    idempotency_key: KeyOpt = None,
) -> None:
    """Compile the spec into a Vertex AI Pipelines (KFP v2) pipeline: YAML, or JSON for -o NAME.json."""
    if out is not None:
        _check_out(out, spec)
    cfg = common.settings()
    job_spec = opts.load(spec, cfg)
    ir = api.compile_pipeline(
        job_spec, idempotency_key=idempotency_key, resolve=resolve, settings=cfg, log=common.stderr_line
    )
    # -o x.json: the same PipelineSpec as JSON (what the name promises; kfp and the Vertex AI
    # SDK read either), else YAML
    as_json = out is not None and out.suffix.lower() == ".json"
    text = json.dumps(ir, indent=2, sort_keys=True) + "\n" if as_json else api.pipeline_yaml(ir)
    if out is None:
        sys.stdout.write(text)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    common.stderr_line(
        f"wrote {out}"
        + (
            ""
            if resolve or job_spec.deploy is None
            else " (deploy steps for a first deploy; `pipeline submit` looks up the model and endpoint)"
        )
    )


# A compiled pipeline is a KFP v2 PipelineSpec, YAML or JSON (-o x.json): its top-level key
# sdkVersion is kfp-X.
_COMPILED = re.compile(r'^(sdkVersion: kfp-|  "sdkVersion": "kfp-)', re.MULTILINE)
_COMPILED_MAX_BYTES = 16 << 20  # a compiled pipeline is kilobytes; a larger file is none


def _check_out(out: Path, spec: Path) -> None:
    """Refuse (exit 2, before anything is compiled) an -o that would replace what is not a
    compiled pipeline: the spec itself (`pipeline compile job.yaml -o job.yaml`), another file,
    a folder. A pipeline compiled before is replaced."""
    if out.is_dir():
        raise UserError(
            f"pipeline compile: -o {out} is a folder", hint=f"give -o a file, e.g. -o {out / 'pipeline.yaml'}"
        )
    if not out.exists():
        return
    same = out.resolve() == Path(spec).resolve()
    try:
        compiled = (
            out.is_file()
            and out.stat().st_size <= _COMPILED_MAX_BYTES
            and bool(_COMPILED.search(out.read_text(errors="replace")))
        )
    except OSError:
        compiled = False
    if same or not compiled:
        what = "is the spec itself" if same else "is a file that is not a compiled pipeline"
        raise UserError(
            f"pipeline compile: -o {out} {what}: writing the pipeline would replace it",
            hint="give -o a new file name, e.g. -o pipeline.yaml (or remove that file first if it may go)",
        )


@app.command()
@common.with_option_groups
def submit(
    spec: SpecPath,
    opts: SpecOptions,
    idempotency_key: KeyOpt = None,
    wait: Annotated[
        bool,
        typer.Option("--wait/--no-wait", help="follow the run until it ends; exit 1 unless it SUCCEEDED"),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="print the exact requests; send, build and look up nothing")
    ] = False,
    pipeline_root: Annotated[
        str | None,
        typer.Option(
            "--pipeline-root",
            help="gs:// folder for the run's files (default: gs://<output bucket>/pipeline-root)",
        ),
    ] = None,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Start the spec as a Vertex AI PipelineJob (at most once per --idempotency-key)."""
    if idempotency_key is not None:
        api.check_key(idempotency_key)
    cfg = common.settings()
    job_spec = opts.load(spec, cfg)
    result = api.pipeline_submit(
        job_spec,
        idempotency_key=idempotency_key,
        dry_run=dry_run,
        pipeline_root=pipeline_root,
        log=common.stderr_line,
        settings=cfg,
    )
    if dry_run:
        return _show_dry_run(result, output)
    _show(result, output, wait)
    if job_spec.deploy is not None and output is OutputFormat.text:  # (a failed run raised above)
        endpoint = job_spec.deploy.endpoint or job_spec.name
        common.stderr_line(
            f"note: the run ends by deploying the model to the endpoint {endpoint} "
            f"({job_spec.project} / {job_spec.region}); its nodes then bill by the hour while it stays "
            f"deployed, whether or not it gets requests: vertex-trainer endpoints {spec} shows them "
            "and their price; vertex-trainer undeploy ENDPOINT DEPLOYED_MODEL_ID takes one off"
        )


@app.command()
@common.with_option_groups
def status(
    run: RunArg,
    place: JobPlace,
    wait: Annotated[
        bool, typer.Option("--wait", help="follow the run until it ends; exit 1 unless it SUCCEEDED")
    ] = False,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Show a pipeline run's state (and its error, if it failed)."""
    cfg = common.settings()
    _show(api.pipeline_status(run, **place.where(cfg), settings=cfg), output, wait)


@app.command()
@common.with_option_groups
def cancel(
    run: RunArg,
    place: JobPlace,
    output: OutputOpt = OutputFormat.text,
) -> None:
    """Cancel a pipeline run (one that already ended is left as it is)."""
    cfg = common.settings()
    found = api.pipeline_status(run, **place.where(cfg), settings=cfg).cancel()
    _show(found, output, wait=False)


def _show(run: Any, output: OutputFormat, wait: bool) -> None:
    if output is OutputFormat.text:
        verb = "adopted" if run.adopted else "run"
        print(f"{verb:8} {run.name}\nstate    {short_state(run.state)}\nconsole  {run.console_url}")
        if run.adopted:
            common.stderr_line(
                f"a pipeline run with idempotency key {run.idempotency_key} already existed: "
                "adopted, not started again"
            )
    if wait and not run.done:
        try:
            run.wait(on_state=lambda r: common.stderr_line(f"state    {short_state(r.state)}"), check=False)
        except KeyboardInterrupt:
            common.stderr_line(
                f"stopped waiting; the run goes on. follow it: vertex-trainer pipeline status "
                f"{run.name} --wait"
            )
            if output is OutputFormat.json:  # the run's object still (its name, to follow it later)
                common.emit_json(run.to_dict())
            raise typer.Exit(130) from None
    if output is OutputFormat.json:
        common.emit_json(run.to_dict())
    elif wait:
        print(f"final    {short_state(run.state)}")
    if wait and not run.succeeded:
        raise JobFailed(run.failure_message())


def _show_dry_run(plan: Any, output: OutputFormat) -> None:
    shown = plan.to_dict()  # as printed: secret-looking env values and flags *** (redact.py)
    if output is OutputFormat.json:
        return common.emit_json(shown)
    lookup, create = shown["requests"]
    print("# dry run: nothing was sent, built or looked up. pipeline submit would:")
    if shown.get("redacted"):
        print(f"# {note(shown['redacted'])}")
    for check in plan.checks or ():  # the data is there before anything is built (exit 2)
        print(f"# - would check: {check['field']} {check['pattern']} matches at least one object")
    if plan.package:
        print(f"# - package: if {plan.package['target']} does not exist yet, build it")
    print(
        f"# - look for the run of idempotency key {plan.idempotency_key}\n{lookup['method']} {lookup['url']}"
    )
    print("# - if there is none: look up the model and endpoint (deploy: only), compile, and create it")
    print(f"{create['method']} {create['url']}?pipelineJobId={create['params']['pipelineJobId']}")
    sys.stdout.write(json.dumps(create["body"], indent=2) + "\n")
