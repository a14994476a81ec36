"""A careless user compiles a pipeline over their spec (issue 42, H2 round 3):
`pipeline compile job.yaml -o job.yaml` (the spec's name completed twice), or `-o` naming another
file of theirs.

The pipeline YAML was written over it, exit 0, "wrote job.yaml": the spec was gone, replaced by
240 lines of KFP PipelineSpec. Now -o naming the spec itself, a file that is not a compiled
pipeline, or a folder is exit 2 before anything is compiled, the file left as it was; a pipeline
compiled before is replaced as always."""

from __future__ import annotations

from pathlib import Path

import yaml

QUICKSTART = Path(__file__).resolve().parents[2] / "job_specs" / "quickstart-local.yaml"


def _spec(tmp_path: Path) -> Path:
    data = yaml.safe_load(QUICKSTART.read_text())
    data["output_dir"] = "gs://bkt/runs"
    data["trainer"].update(train_data="gs://bkt/data/train-*", eval_data="gs://bkt/data/validation-*")
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_o_naming_the_spec_itself_is_exit_2_and_the_spec_is_kept(run_cli, tmp_path):
    spec = _spec(tmp_path)
    before = spec.read_text()
    proc = run_cli("pipeline", "compile", spec, "-o", spec)
    assert proc.returncode == 2, proc.stderr
    assert f"-o {spec} is the spec itself: writing the pipeline would replace it" in proc.stderr
    assert spec.read_text() == before


def test_o_naming_another_file_or_a_folder_is_exit_2(run_cli, tmp_path):
    spec = _spec(tmp_path)
    notes = tmp_path / "notes.yaml"
    notes.write_text("todo: tune the learning rate\n")
    proc = run_cli("pipeline", "compile", spec, "-o", notes)
    assert proc.returncode == 2 and "is a file that is not a compiled pipeline" in proc.stderr
    assert notes.read_text() == "todo: tune the learning rate\n"
    proc = run_cli("pipeline", "compile", spec, "-o", tmp_path)
    assert proc.returncode == 2 and f"-o {tmp_path / 'pipeline.yaml'}" in proc.stderr


def test_a_pipeline_compiled_before_is_replaced(run_cli, tmp_path):
    spec, out = _spec(tmp_path), tmp_path / "pipeline.yaml"
    for _ in range(2):
        proc = run_cli("pipeline", "compile", spec, "-o", out)
        assert proc.returncode == 0, proc.stderr
    assert yaml.safe_load(out.read_text())["sdkVersion"].startswith("kfp-")
