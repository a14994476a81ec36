"""`data synth` speaks like every other command (issue 24 items 2 and 7): a bad OUT_DIR or an
unreachable bucket is exit 2 with one message and no traceback; a good run shows no TensorFlow
start-up banner."""

from __future__ import annotations

import subprocess

from tests.cli_support import cli_command, edge_env

# TensorFlow's Cloud Storage client retries a failed request for ~18 s by default: fewer, shorter.
FAST_GCS = {
    "GCS_RETRY_CONFIG_MAX_RETRIES": "1",
    "GCS_RETRY_CONFIG_INIT_DELAY_TIME_US": "1000",
    "GCS_RETRY_CONFIG_MAX_DELAY_TIME_US": "2000",
}


def synth(tmp_path, out: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            *cli_command(),
            "data",
            "synth",
            out,
            "--examples",
            "8",
            "--shards",
            "2",
            "--image-size",
            "16",
            "--num-classes",
            "2",
            "--eval-examples",
            "4",
        ],
        capture_output=True,
        text=True,
        env=edge_env(tmp_path, **env),
        cwd=tmp_path,
        timeout=240,
    )


def test_a_file_as_out_dir_is_exit_2_with_one_message(tmp_path):
    (tmp_path / "taken").write_text("x")
    result = synth(tmp_path, "taken")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines()[0] == "error: OUT_DIR 'taken' is a file, not a directory"
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 2


def test_an_unreachable_bucket_is_exit_2_with_one_message(tmp_path):
    # No emulator, no credentials: TensorFlow's own gs:// client finds no host.
    result = synth(tmp_path, "gs://bucket/x", **FAST_GCS)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: cannot write to gs://bucket/x: "), result.stderr
    assert lines[1].startswith("  hint: gs:// needs Cloud Storage") and len(lines) == 2, result.stderr


def test_a_good_run_shows_no_tensorflow_banner(tmp_path):
    result = synth(tmp_path, "data")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "wrote 3 files to data\n"
    assert result.stderr == ""  # no "absl::InitializeLog", oneDNN or cpu_feature_guard lines
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [
        "train-00000-of-00002",
        "train-00001-of-00002",
        "validation-00000-of-00001",
    ]
