"""Your code as you wrote it (issue 42): a single script in the shape of a Vertex AI sample
notebook's (tests/owncode/shapes/notebook/task.py: --distribute single|mirror|multi, the model saved
to AIP_MODEL_DIR), a spec for --local only (no repository), Google's prebuilt `:latest` base image,
and what the tool says: the args as a list, the model path only where a model was written, a
failing replica's exception once, its type always kept. The script in the sandbox (the cloud path,
and --local into the sandbox's bucket): tests/owncode/test_owncode_sandbox.py, whose tests share
one sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.cli_support import edge_env
from tests.owncode.conftest import script_data
from tests.shared import cli_runner, latest_run, records
from vertex_trainer.local.failure import LINE_CHARS, Tail, exception_line, excerpt

PREBUILT = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-9:latest"  # as the sample tags it


def _spec(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _local_only(code: Path, out: Path | str, args: list[str]) -> dict:
    """The spec a notebook user writes for --local: image.code and script, no image kind."""
    data = script_data(code, image={"repository": None}, output_dir=str(out), args=args)
    for key in ("project", "region"):
        data.pop(key)
    return data


def _cli(tmp_path: Path):
    return cli_runner(edge_env(tmp_path), cwd=tmp_path)


def test_a_local_only_script_spec_needs_no_repository_and_shows_its_args_as_a_list(tmp_path, notebook):
    path = _spec(tmp_path, _local_only(notebook, tmp_path / "runs", ["--epochs=2", "--nnsize=32 8"]))
    run = _cli(tmp_path)
    ok = run("validate", path, "--local")
    assert ok.returncode == 0, ok.stderr
    lines = ok.stdout.splitlines()
    assert (
        "  image     (none: --local only; a cloud job needs image.repository or image.python_package)"
        in lines
    )
    assert f"  code      {notebook} (python task.py)" in lines
    # One argument holds a space: a list shows it as one, a joined line would read as two.
    assert '  args      ["--epochs=2", "--nnsize=32 8"]' in lines
    cloud = run("validate", path, "--project=my-project-1", "--region=us-central1")
    assert cloud.returncode == 2
    assert "image: has image.code but no way to package it for Vertex AI" in cloud.stderr
    assert "add image.repository: REGION-docker.pkg.dev/PROJECT/REPO/NAME" in cloud.stderr
    # Neither code nor a kind is still refused, naming the three.
    bare = _spec(tmp_path, {"name": "x", "hardware": "cpu", "image": {"script": "task.py"}})
    refused = run("validate", bare, "--local")
    assert refused.returncode == 2
    assert "set exactly one of uri, repository or python_package: true (none is set)" in refused.stderr


def test_googles_prebuilt_latest_base_image_is_accepted_with_a_warning(tmp_path, notebook):
    data = script_data(notebook, image={"base_image": PREBUILT})
    run = _cli(tmp_path)
    dry = run("package", _spec(tmp_path, data), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"variant: cpu (base {PREBUILT})" in dry.stdout
    checked = run("validate", _spec(tmp_path, data))
    assert checked.returncode == 0, checked.stderr
    warning = [line for line in checked.stderr.splitlines() if line.startswith("warning: image.base_image")]
    assert len(warning) == 1 and "tags :latest only" in warning[0] and "base_image_digest" in warning[0]
    # Pinned by digest: no warning. Anyone else's :latest: still refused, naming the field.
    digest = "sha256:" + "a" * 64
    pinned = run(
        "validate",
        _spec(tmp_path, script_data(notebook, image={"base_image": PREBUILT, "base_image_digest": digest})),
    )
    assert pinned.returncode == 0 and "warning: image.base_image" not in pinned.stderr
    other = run(
        "validate",
        _spec(tmp_path, script_data(notebook, image={"base_image": "tensorflow/tensorflow:latest"})),
    )
    assert other.returncode == 2
    assert "image.base_image: must be pinned to a version tag (or a digest), not latest" in other.stderr


def test_local_names_both_tensorflows_once_and_no_model_where_none_was_written(tmp_path, notebook):
    import importlib.metadata

    ours = importlib.metadata.version("tensorflow-cpu")
    data = _local_only(notebook, tmp_path / "runs", ["--no-save"])
    data["image"]["base_image"] = PREBUILT
    done = _cli(tmp_path)("submit", _spec(tmp_path, data), "--local")
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: --local runs your code")]
    assert notes == [
        f"note: --local runs your code on this machine's TensorFlow {ours}; on Vertex AI it runs on its "
        "image's, TensorFlow 2.9 (tf-cpu.2-9:latest): what differs between the two shows there only"
    ]
    run = latest_run(tmp_path / "runs")
    assert not (run / "model").exists() or not any((run / "model").iterdir())
    assert f"model    none: nothing was written to AIP_MODEL_DIR ({run}/model/)" in done.stdout.splitlines()


def test_a_failing_replica_shows_its_exception_once_and_its_type_always(tmp_path, notebook):
    # The message carries a printed tensor: 100 lines of numbers after the exception's first line.
    (notebook / "task.py").write_text(
        "print('starting')\n"
        "def check(rows):\n"
        "    rows = '\\n'.join(str([i] * 8) for i in range(rows))\n"
        "    raise ValueError('bad shape in\\n' + rows + 'x' * 900)\n"
        "check(100)\n"
    )
    done = _cli(tmp_path)("submit", _spec(tmp_path, _local_only(notebook, tmp_path / "runs", [])), "--local")
    assert done.returncode == 1
    err = done.stderr.splitlines()
    said = [line for line in err if line.startswith("workerpool0-0 exited with code 1")]
    assert said == [
        "workerpool0-0 exited with code 1: ValueError: bad shape in (its last lines are just above)"
    ]
    assert (
        err[-1] == "error: local job own ended FAILED (workerpool0-0 exited with 1: ValueError: bad shape in)"
    )
    # The replica's lines were streamed once; the summary and the error did not print them again.
    assert sum("[42, 42, 42" in line for line in err) == 1
    # The run's record keeps the excerpt, the exception's head first, the long line cut (32 + 900
    # characters, 300 kept).
    tail = json.loads((records(latest_run(tmp_path / "runs")) / "result.json").read_text())["log_tail"]
    assert "ValueError: bad shape in" in tail and any("lines of the message left out" in t for t in tail)
    assert any(t.endswith("(632 more characters)") for t in tail), tail[-1][-80:]


def test_the_excerpt_keeps_the_last_exception_and_cuts_long_lines():
    frames = [
        '  File "task.py", line 9, in <module>',
        "    main()",
        '  File "task.py", line 4, in main',
        "    raise KeyError(x)",
    ]
    first = ["Traceback (most recent call last):", *frames[:2], "OSError: first"]
    chained = ["", "During handling of the above exception, another exception occurred:", ""]
    numbers = [f"[{i} {i + 1}]" for i in range(60)]
    lines = [
        "hello",
        *first,
        *chained,
        "Traceback (most recent call last):",
        *frames,
        "KeyError: 'the key'",
        *numbers,
    ]
    tail = Tail(40)
    for line in lines:
        tail.append(line)
    shown = tail.excerpt(20)
    assert len(shown) == 20
    assert shown[:4] == ["Traceback (most recent call last):", frames[2], frames[3], "KeyError: 'the key'"]
    assert shown[4] == f"... ({60 - 15:,} lines of the message left out)"
    assert shown[5:] == numbers[-15:]
    assert exception_line(shown) == "KeyError: 'the key'"
    assert excerpt(lines, 20) == shown  # the same from the whole log
    # A short log is shown whole; a long line is cut, saying by how much.
    assert excerpt(["a", "b" * (LINE_CHARS + 5)]) == ["a", "b" * LINE_CHARS + " ... (5 more characters)"]
    assert exception_line(["no traceback", "ValueError: not raised"]) is None
