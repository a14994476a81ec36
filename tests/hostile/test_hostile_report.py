"""`report` on malformed run folders (reporting/*.py, issue 41): every broken, hostile or
missing file gives a page that says what could not be read (RunData.notes), or exit 2 with one
line naming the file; never a traceback, a hang or an unbounded read.

Each case starts from a copy of the real quickstart run (tests/report/data: its folder, and its
records beside it) and breaks one thing: truncated or non-JSON files, the wrong types, NaN and
Infinity, negative or absurd times, a best trial whose folder is the study itself (the recursion),
metric and parameter names that matplotlib would read as mathtext ($...$), a 34 MiB log, binary
garbage, a FIFO where a file should be, missing folders."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from vertex_trainer import api
from vertex_trainer.api.report import report_data
from vertex_trainer.errors import UserError
from vertex_trainer.reporting import bounded_read as report_read
from vertex_trainer.reporting import plots as report_plots
from vertex_trainer.reporting import run_data as report

DATA = Path(__file__).resolve().parents[1] / "report" / "data"
MiB = 1 << 20


@pytest.fixture
def run(tmp_path) -> Path:
    shutil.copytree(DATA / ".vertex-trainer", tmp_path / ".vertex-trainer")
    run = Path(shutil.copytree(DATA / "quickstart", tmp_path / "quickstart"))
    shutil.rmtree(run / "logs")  # no TensorBoard files: a log without epochs reads none (no TensorFlow)
    return run


def records(run: Path) -> Path:
    return run.parent / ".vertex-trainer" / run.name


def page_of(run: Path, tmp_path: Path, fmt: str = "html") -> str:
    out = api.report(str(run), str(tmp_path / f"page.{fmt}"), fmt=fmt)
    return html.unescape(Path(out).read_text(encoding="utf-8")) if fmt == "html" else out


def write(path: Path, content: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")


def edit_json(path: Path, change: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def study(run: Path, trials: object, *, spec: object | None = None) -> Path:
    """A study beside `run` whose records hold `trials` (trials.json's "trials")."""
    base = run.parent / "study"
    base.mkdir(exist_ok=True)
    write(records(base) / "trials.json", json.dumps({"name": "s", "trials": trials}))
    body = (
        spec
        if spec is not None
        else {"studySpec": {"metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}]}}
    )
    write(records(base) / "hyperparameter_tuning_job.json", json.dumps(body))
    return base


def trial(n: int, metric: object, output_dir: object = None, **parameters: object) -> dict:
    out = {"id": str(n), "state": "SUCCEEDED", "metric": metric, "parameters": parameters or {"lr": 0.1 * n}}
    if output_dir is not None:
        out["output_dir"] = str(output_dir)
    return out


# (what to break, the note the page carries; "" when the page needs no note)
CASES: dict[str, tuple[Callable[[Path], Path | None], str]] = {
    "metrics truncated": (
        lambda r: write(r / "metrics.json", (r / "metrics.json").read_text()[:100]),
        "metrics.json: not JSON",
    ),
    "metrics an integer of 5,000 digits": (
        lambda r: write(r / "metrics.json", '{"epochs": ' + "9" * 5000 + "}"),
        "metrics.json: not JSON this report reads",
    ),
    "metrics a list": (
        lambda r: write(r / "metrics.json", "[1, 2]"),
        "metrics.json: a JSON list, not an object",
    ),
    "metrics strings for numbers": (
        lambda r: edit_json(
            r / "metrics.json", lambda m: m.update(eval_accuracy="high", epochs="three", train_seconds="5")
        ),
        "metrics.json: eval_accuracy is 'high', not a number",
    ),
    "metrics NaN and Infinity": (
        lambda r: write(
            r / "metrics.json",
            '{"eval_accuracy": NaN, "steady_examples_per_sec": Infinity, "input_wait_fraction": -Infinity,'
            ' "eval_loss": 0.5, "epochs": 3}',
        ),
        "metrics.json: eval_accuracy is nan",
    ),
    "metrics negative seconds": (
        lambda r: edit_json(r / "metrics.json", lambda m: m.update(train_seconds=-5, compile_seconds=-1)),
        "metrics.json: train_seconds is -5, less than 0",
    ),
    "metrics binary garbage": (lambda r: write(r / "metrics.json", os.urandom(4096)), "metrics.json: not"),
    "metrics nested 100k deep": (
        lambda r: write(r / "metrics.json", "[" * 100_000 + "]" * 100_000),
        "metrics.json: nested too deeply",
    ),
    "metrics over 16 MiB": (
        lambda r: write(r / "metrics.json", '{"x": "' + "a" * (17 * MiB) + '"}'),
        "metrics.json: more than 16 MiB",
    ),
    "metrics a FIFO": (
        lambda r: (r / "metrics.json").unlink() or os.mkfifo(r / "metrics.json"),
        "not a regular file",
    ),
    "result not JSON": (lambda r: write(records(r) / "result.json", "{nope"), "result.json: not JSON"),
    "result wrong types": (
        lambda r: write(
            records(r) / "result.json", json.dumps({"name": ["x"], "state": {"a": 1}, "elapsed_s": "long"})
        ),
        "result.json: elapsed_s is 'long', not a number",
    ),
    "result negative elapsed": (
        lambda r: edit_json(records(r) / "result.json", lambda d: d.update(elapsed_s=-30)),
        "result.json: elapsed_s is -30, less than 0",
    ),
    "result absurd elapsed": (
        lambda r: edit_json(records(r) / "result.json", lambda d: d.update(elapsed_s=1e300)),
        "result.json: elapsed_s is 1e+300",
    ),
    "custom job a list": (
        lambda r: write(records(r) / "custom_job.json", "[]"),
        "custom_job.json: a JSON list",
    ),
    "custom job spec a string": (
        lambda r: write(records(r) / "custom_job.json", json.dumps({"jobSpec": "x"})),
        "custom_job.json: jobSpec is 'x', not an object",
    ),
    "custom job machine of wrong types": (
        lambda r: edit_json(
            records(r) / "custom_job.json",
            lambda d: d["jobSpec"]["workerPoolSpecs"][0].update(
                machineSpec={"machineType": 5, "acceleratorCount": "x"}, replicaCount="many"
            ),
        ),
        "custom_job.json: jobSpec.workerPoolSpecs[0]",
    ),
    "custom job scheduling a list": (
        lambda r: edit_json(records(r) / "custom_job.json", lambda d: d["jobSpec"].update(scheduling=["x"])),
        "custom_job.json: jobSpec.scheduling",
    ),
    "config wrong types": (
        lambda r: edit_json(
            r / "trainer_config.json", lambda c: c.update(steps_per_epoch=0, warmup_steps="x", flags=[1])
        ),
        "trainer_config.json: steps_per_epoch is 0",
    ),
    "config a billion epochs": (
        lambda r: edit_json(
            r / "trainer_config.json", lambda c: c.update(total_steps=10**12, steps_per_epoch=1)
        ),
        "",
    ),
    "config NaN learning rate": (
        lambda r: write(r / "trainer_config.json", '{"peak_learning_rate": NaN, "total_steps": 96}'),
        "trainer_config.json: peak_learning_rate is nan",
    ),
    "spec binary garbage": (
        lambda r: write(records(r) / "spec.yaml", b"\xff\xfe\x00" + os.urandom(2000)),
        "",
    ),
    "spec scheduling a list": (
        lambda r: write(records(r) / "spec.yaml", "region: us-central1\nscheduling: [1]\n"),
        "",
    ),
    # the run's recorded region and max_cost (run.json, local/layout.py): the report reads no YAML
    "run.json max_cost NaN": (
        lambda r: write(records(r) / "run.json", '{"region": "us-central1", "max_cost": NaN}'),
        "run.json: max_cost is nan",
    ),
    "run.json max_cost negative": (
        lambda r: write(records(r) / "run.json", '{"region": [1], "max_cost": -5}'),
        "run.json: max_cost is -5",
    ),
    "spec YAML bomb": (
        lambda r: write(
            records(r) / "spec.yaml",
            "a: &a [x, x, x, x, x, x, x, x, x]\n"
            + "".join(
                f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
                for p, c in zip("abcdefgh", "bcdefghi", strict=True)
            )
            + "scheduling: {max_cost: 1}\n",
        ),
        "",
    ),
    "log binary garbage": (lambda r: write(records(r) / "logs" / "workerpool0-0.log", os.urandom(MiB)), ""),
    "log with impossible timestamps": (
        lambda r: write(
            records(r) / "logs" / "workerpool0-0.log",
            "2026-13-45T99:99:99.000000Z progress epoch=1/1 step=4/4 loss=0.5 examples_per_sec=10\n"
            "9999-99-99T00:00:00.0Z progress epoch=99999999999999999999/1 step=1/1 loss=nan\n",
        ),
        "",
    ),
    "log a directory": (
        lambda r: (
            (records(r) / "logs" / "workerpool0-0.log").unlink()
            or (records(r) / "logs" / "workerpool0-0.log").mkdir()
        ),
        "workerpool0-0.log: not a regular file",
    ),
    "log of 34 MiB": (
        lambda r: write(
            records(r) / "logs" / "workerpool0-0.log",
            "x" * 200
            + "\n"
            + ("2026-12-02T04:04:41.000000Z noise " + "n" * 92 + "\n") * (34 * MiB // 128)
            + "2026-12-02T04:05:41.000000Z progress epoch=1/1 step=2/2 loss=0.5 examples_per_sec=10\n",
        ),
        "workerpool0-0.log: 33.7 MiB; the report read its last 32 MiB",
    ),
    "run folder missing": (lambda r: shutil.rmtree(r) or records(r), ""),
    "records missing": (lambda r: shutil.rmtree(records(r)), ""),
    "logs missing": (lambda r: shutil.rmtree(records(r) / "logs"), ""),
    "trials not a list": (lambda r: study(r, "x"), "trials.json: trials is 'x', not a list"),
    "trials of wrong types": (
        lambda r: study(
            r,
            [
                5,
                "x",
                {"id": 3, "metric": "abc"},
                {"id": 4, "metric": float("nan")},
                {"id": 5, "parameters": [1]},
            ],
        ),
        "trials.json: trial 1 is 5, not an object",
    ),
    "study spec wrong types": (
        lambda r: study(r, [trial(1, 0.5)], spec={"studySpec": {"metrics": [5]}}),
        "hyperparameter_tuning_job.json: studySpec.metrics[0] is 5",
    ),
    "study goal unknown": (
        lambda r: study(
            r, [trial(1, 0.5)], spec={"studySpec": {"metrics": [{"metricId": "acc", "goal": "SIDEWAYS"}]}}
        ),
        "goal is 'SIDEWAYS'",
    ),
    "best trial is the study itself": (
        lambda r: study(r, [trial(1, 0.9, r.parent / "study")]),
        "is a study, not a run",
    ),
    "two studies point at each other": (
        lambda r: (
            study(r, [trial(1, 0.9, r.parent / "other")]),
            shutil.copytree(records(r.parent / "study"), records(r.parent / "other")),
            (r.parent / "other").mkdir(),
            edit_json(
                records(r.parent / "other") / "trials.json",
                lambda d: d.update(trials=[trial(1, 0.9, r.parent / "study")]),
            ),
        )[0],
        "is a study, not a run",
    ),
    "mathtext names": (
        lambda r: study(
            r,
            [
                trial(
                    n,
                    0.1 * n,
                    r,
                    **{"$x_1^2$ \\ _ ünïcödé": 0.1 * n, "y" * 10_000: n, "$\\frac{1}{0}$": 1.0 * n},
                )
                for n in (1, 2, 3)
            ],
            spec={"studySpec": {"metrics": [{"metricId": "$\\undefined{x}$", "goal": "MAXIMIZE"}]}},
        ),
        "",
    ),
    "two hundred parameters": (
        lambda r: study(r, [trial(n, 0.1 * n, **{f"p{i}": i * n for i in range(200)}) for n in (1, 2)]),
        "trials.json: more than 16 parameters",
    ),
}


# The cases whose data reaches the plots or the page's formats in a new way: drawn whole (about a
# second each); the others are checked on what the page is drawn from.
DRAWN = {
    "metrics strings for numbers",
    "metrics NaN and Infinity",
    "metrics negative seconds",
    "result wrong types",
    "config wrong types",
    "config a billion epochs",
    "config NaN learning rate",
    "spec max_cost NaN",
    "trials of wrong types",
    "mathtext names",
}


@pytest.mark.parametrize("case", CASES)
def test_a_malformed_run_gives_a_page_that_says_what_was_unreadable(run, tmp_path, case):
    breaks, note = CASES[case]
    target = breaks(run) or run
    if case in DRAWN:
        page = page_of(target, tmp_path)
        assert page.lower().startswith("<!doctype html>") and "Traceback" not in page
        assert note in page, re.findall(r'class="meta note">([^<]*)', page)
    else:
        notes = report_data(str(target)).notes
        assert not note or any(note in n for n in notes), notes


def test_a_study_shows_at_most_max_parameters_plots(run):
    target = CASES["two hundred parameters"][0](run)
    data = report_data(str(target))
    params = [c for c in report_plots.charts(data) if c.id.startswith("param-")]
    assert (
        len(params) == report_read.MAX_PARAMETERS
        and len(data.trials[0]["parameters"]) == report_read.MAX_PARAMETERS
    )


def test_mathtext_names_draw_in_the_png_too(run, tmp_path):
    target = CASES["mathtext names"][0](run)
    assert page_of(target, tmp_path, "png").endswith(".png")


def test_a_path_that_is_no_run_is_exit_2_naming_it(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="holds no run"):
        api.report(str(tmp_path / "empty"), str(tmp_path / "x.html"))


def test_a_page_that_cannot_be_written_is_exit_2_naming_the_file(run, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match=r"cannot write .*file/page.html"):
        api.report(str(run), str(tmp_path / "file" / "page.html"))


def test_unreadable_tensorboard_files_are_a_note(run):
    write(records(run) / "logs" / "workerpool0-0.log", "no progress lines\n")
    write(run / "logs" / "train" / "events.out.tfevents.1.vm.1.0.v2", b"\x00garbage")

    def broken(log_dir: str) -> list:
        raise ValueError("corrupt record at offset 12")

    data = report.from_run_dir(str(run), events=broken)
    assert data.epochs == () and any("corrupt record at offset 12" in n for n in data.notes)


def test_a_huge_log_is_read_from_its_end_within_the_bound(tmp_path):
    log = tmp_path / "big.log"
    write(log, "a" * (report_read.MAX_LOG_BYTES + 5 * MiB) + "\nlast line\n")
    notes = report_read.Notes()
    lines = report_read.read_log(log, notes)
    assert lines[-1] == "last line" and sum(map(len, lines)) <= report_read.MAX_LOG_BYTES
    assert "read its last 32 MiB" in notes.all()[0]
