"""Two idempotency keys that name one run folder (H1, item 4).

A run's folder is `<name>-<key>`, less the `vt-` of a key the tool made (contract.run_name):
a submission without a key runs in `digits-20261204-131500-abc123` under the key
`vt-20261204-131500-abc123`. A careless user retrying it copies the key from the folder's name,
`--idempotency-key 20261204-131500-abc123`: no job carries that key, so a second job was created
into the first one's folder, writing over its checkpoints and model (both billed). Now such a
key is exit 2 before anything is sent, naming the key that retries the submission; the tool's
own key adopts its job.
"""

from __future__ import annotations

import json

import pytest
import requests

from tests.cli_support import edge_env
from tests.shared import cli_runner, spec_yaml, storage_emulator, write_spec

JOB = {
    "name": "digits",
    "hardware": "cpu",
    "scheduling": None,
    "output_dir": "gs://out-bucket/runs/digits",
    "trainer": {"train_data": "gs://data-bucket/d/train-*", "eval_data": None},
}


@pytest.fixture
def run(fake, tmp_path):
    with storage_emulator("out-bucket", "data-bucket") as url:
        put = {"uploadType": "media", "name": "d/train-00000"}
        assert requests.post(f"{url}/upload/storage/v1/b/data-bucket/o", params=put, data=b"x").ok
        yield cli_runner(edge_env(tmp_path, VERTEX_TRAINER_API_ENDPOINT=fake.url, STORAGE_EMULATOR_HOST=url))


def test_a_key_copied_from_a_folder_name_is_refused_and_the_tools_key_adopts(fake, run, tmp_path):
    spec = write_spec(tmp_path, spec_yaml(None, **JOB))
    first = run("submit", spec, "--no-wait", "--output", "json")  # no key: the tool makes one
    assert first.returncode == 0, first.stderr
    made = json.loads(first.stdout)
    suffix = made["output_dir"].rsplit("/", 1)[-1].removeprefix("digits-")

    copied = run("submit", spec, "--no-wait", "--idempotency-key", suffix)
    assert copied.returncode == 2, copied.stderr
    assert f"--idempotency-key {suffix!r} is the end of a run's folder name" in copied.stderr
    assert f"--idempotency-key vt-{suffix}" in copied.stderr
    assert list(fake.jobs) == [made["name"]]  # nothing created

    retry = run("submit", spec, "--no-wait", "--idempotency-key", f"vt-{suffix}", "--output", "json")
    assert retry.returncode == 0, retry.stderr
    assert json.loads(retry.stdout)["name"] == made["name"] and list(fake.jobs) == [made["name"]]
