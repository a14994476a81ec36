"""`data synth` speaks like every other command (issue 24 items 2 and 7): a bad OUT_DIR or an
unreachable bucket is exit 2 with one message and no traceback. It runs without TensorFlow
(issue 31): the records are vertex_trainer.dataprep.records', gs:// goes through the project's
Cloud Storage client (the emulator with STORAGE_EMULATOR_HOST), so a good run's process never
imports tensorflow and prints nothing on stderr. The CLI runs in this process (tests/cli_support.py's
`invoke`) except where the process itself is what is checked. That TensorFlow reads what it
writes and the trainer learns from it: tests/foundation/test_foundation_data_cli.py and the
quickstart runs of tests/local/test_local_trainer.py (local and gs:// data)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from PIL import Image

from tests.cli_support import edge_env, invoke
from tests.shared import storage_emulator
from vertex_trainer.dataprep import records

ARGS = [
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
]
NAMES = ["train-00000-of-00002", "train-00001-of-00002", "validation-00000-of-00001"]


def synth(tmp_path: Path, out: str, **env: str) -> subprocess.CompletedProcess[str]:
    return invoke(["data", "synth", out, *ARGS], env=edge_env(tmp_path, **env), cwd=tmp_path)


def check_records(shards: dict[str, bytes]) -> None:
    """The shards hold 4 + 4 train and 4 validation records: 16 px RGB JPEGs, labels 0-1."""
    counts = []
    for data in shards.values():
        examples = [records.decode_example(r) for r in records.read_records(io.BytesIO(data))]
        counts.append(len(examples))
        for ex in examples:
            assert ex["image/format"] == [b"JPEG"] and ex["image/class/label"][0] in (0, 1)
            assert ex["image/height"] == ex["image/width"] == [16] and ex["image/channels"] == [3]
            image = Image.open(io.BytesIO(ex["image/encoded"][0]))
            assert (image.format, image.size, image.mode) == ("JPEG", (16, 16), "RGB")
    assert counts == [4, 4, 4]


def test_a_file_as_out_dir_is_exit_2_with_one_message(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("x")
    result = synth(tmp_path, "taken")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines()[0] == "error: OUT_DIR 'taken' is a file, not a directory"
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 2


def test_an_unknown_scheme_is_exit_2_and_writes_nothing(tmp_path: Path) -> None:
    result = synth(tmp_path, "s3://bucket/x")
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert (
        lines[0] == "error: OUT_DIR 's3://bucket/x': data synth writes a local directory or gs://, not s3://"
    )
    assert lines[1] == "  hint: pass a local directory or gs://bucket/prefix" and len(lines) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gcloud-config"]  # no local "s3:" folder


def test_an_unreachable_bucket_is_exit_2_with_one_message(tmp_path: Path) -> None:
    # No emulator, no credentials (edge_env: an empty gcloud configuration, NO_GCE_CHECK): the
    # storage client has nothing to send with, so nothing is sent.
    result = synth(tmp_path, "gs://bucket/x")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == (
        "error: cannot write to gs://bucket/x: no Google Cloud credentials found (Application Default "
        "Credentials); nothing was sent"
    ), result.stderr
    assert lines[1].startswith("  hint: gs:// needs Cloud Storage") and len(lines) == 2, result.stderr


def test_gs_through_the_storage_emulator_and_a_missing_bucket(tmp_path: Path) -> None:
    with storage_emulator("data") as url:
        result = synth(tmp_path, "gs://data/synth", STORAGE_EMULATOR_HOST=url)
        assert result.returncode == 0, result.stderr
        assert result.stdout == "wrote 3 files to gs://data/synth\n" and result.stderr == ""
        shards = {name: _read(url, f"synth/{name}") for name in NAMES}
        missing = synth(tmp_path, "gs://nope/synth", STORAGE_EMULATOR_HOST=url)
    check_records(shards)
    assert missing.returncode == 2 and missing.stdout == ""
    lines = missing.stderr.splitlines()
    assert lines == [
        "error: cannot write to gs://nope/synth: bucket gs://nope does not exist",
        "  hint: create it (gcloud storage buckets create gs://nope) or pass a bucket that exists",
    ]


def _read(url: str, name: str) -> bytes:
    import urllib.parse
    import urllib.request

    quoted = urllib.parse.quote(name, safe="")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"{url}/storage/v1/b/data/o/{quoted}?alt=media", timeout=30) as response:
        data: bytes = response.read()
    return data


def test_a_good_run_imports_no_tensorflow_and_shows_nothing_on_stderr(tmp_path: Path) -> None:
    # Its own process (the suite's may hold TensorFlow already): -X importtime lists every module
    # the run imported on stderr, so stderr is that list and nothing else (no banner, no warning).
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "vertex_trainer", "data", "synth", "data", *ARGS],
        capture_output=True,
        text=True,
        env=edge_env(tmp_path),
        cwd=tmp_path,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == "wrote 3 files to data\n"
    lines = result.stderr.splitlines()
    assert all(line.startswith("import time:") for line in lines), [
        line for line in lines if not line.startswith("import time:")
    ]
    modules = {line.rsplit("|", 1)[-1].strip() for line in lines[1:]}
    assert {"trainer.datagen", "vertex_trainer.dataprep.records", "PIL.JpegImagePlugin"} <= modules
    assert not {m for m in modules if m.split(".")[0] in ("tensorflow", "keras", "tf_keras")}
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == NAMES
    check_records({name: (tmp_path / "data" / name).read_bytes() for name in NAMES})
