"""A careless user synthesizes a second dataset into a gs:// folder that holds one (issue 42, H2
round 2): `data synth gs://b/d --shards 4`, then `--shards 2 --image-size 16 --num-classes 5`.

Round 1 refused it for a local folder (test_hostile_careless_synth.py) but not in Cloud Storage,
where a job's data lives: the second run wrote its 2 shards beside the first's 4 and said "wrote
2 files", and a job's `train_data: gs://b/d/train-*` read both datasets, mixed, silently. Now a
gs:// folder is checked as a local one is, before anything is written; objects in its
sub-folders do not count, and the same command again is fine.
"""

from __future__ import annotations

import pytest
import requests

from tests.cli_support import edge_env
from tests.hostile.test_hostile_careless_synth import FIRST
from tests.shared import cli_runner, put_object, storage_emulator


@pytest.fixture
def bucket():
    with storage_emulator("data") as url:
        yield url


def _objects(url: str) -> dict[str, str]:
    """name -> md5 of every object in the bucket."""
    got = requests.get(f"{url}/storage/v1/b/data/o", timeout=10)
    got.raise_for_status()
    return {o["name"]: o.get("md5Hash", "") for o in got.json().get("items", [])}


def test_a_second_dataset_into_the_same_gs_folder_is_refused_before_writing(bucket, tmp_path):
    run = cli_runner(edge_env(tmp_path, STORAGE_EMULATOR_HOST=bucket), cwd=tmp_path)
    put_object(bucket, "gs://data/d/old/train-00000-of-00009")  # a sub-folder's: not in d/
    first = run("data", "synth", "gs://data/d", *FIRST)
    assert first.returncode == 0, first.stderr
    before = _objects(bucket)
    assert sorted(n for n in before if n.count("/") == 1) == [
        *(f"d/train-0000{i}-of-00004" for i in range(4)),
        "d/validation-00000-of-00001",
    ]

    again = run("data", "synth", "gs://data/d", *FIRST)  # the same command: every object replaced
    assert again.returncode == 0, again.stderr
    assert _objects(bucket) == before

    other = run(
        "data",
        "synth",
        "gs://data/d",
        "--examples",
        "8",
        "--shards",
        "2",
        "--image-size",
        "16",
        "--num-classes",
        "5",
    )
    assert other.returncode == 2 and "Traceback" not in other.stderr and other.stdout == ""
    assert (
        "OUT_DIR gs://data/d holds 5 shard(s) of an earlier dataset that this run would not replace"
        in other.stderr
    )
    assert "train-00000-of-00004" in other.stderr and "would mix the two" in other.stderr
    assert _objects(bucket) == before  # nothing written
