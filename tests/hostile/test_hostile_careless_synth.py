"""A careless user synthesizes data into a folder that already holds another dataset (issue 42,
A1): `data synth d --shards 4`, then `data synth d --shards 2 --image-size 16 --num-classes 5`.

The second run wrote its 2 shards beside the first run's 4 (train-0000N-of-00002 beside
train-0000N-of-00004), said "wrote 2 files to d", and exit 0: a spec's `train_data: d/train-*`
then read both datasets, two image sizes and label sets mixed, silently. Now a run that would
leave an earlier dataset's shards beside its own is exit 2 naming them, before writing anything;
the same command again (every file replaced) is fine, as `make demo` run twice does.
"""

from __future__ import annotations

from tests.cli_support import edge_env
from tests.shared import cli_runner

FIRST = (
    "--examples",
    "16",
    "--shards",
    "4",
    "--image-size",
    "8",
    "--num-classes",
    "3",
    "--eval-examples",
    "4",
)


def test_a_second_dataset_into_the_same_folder_is_refused_before_writing(tmp_path):
    run = cli_runner(edge_env(tmp_path), cwd=tmp_path)
    out = tmp_path / "d"
    assert run("data", "synth", out, *FIRST).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(before) == [f"train-0000{i}-of-00004" for i in range(4)] + ["validation-00000-of-00001"]

    again = run("data", "synth", out, *FIRST)  # the same command: every file replaced, nothing mixed
    assert again.returncode == 0, again.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before

    other = run(
        "data", "synth", out, "--examples", "8", "--shards", "2", "--image-size", "16", "--num-classes", "5"
    )
    assert other.returncode == 2 and "Traceback" not in other.stderr
    assert (
        f"OUT_DIR {out} holds 5 shard(s) of an earlier dataset that this run would not replace"
        in other.stderr
    )
    assert "train-00000-of-00004" in other.stderr and "would mix the two" in other.stderr
    assert "hint: remove them first, or write to an empty directory" in other.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing written

    no_eval = run("data", "synth", out, *FIRST[:-2])  # the old eval split would stay beside the new data
    assert no_eval.returncode == 2 and "(validation-00000-of-00001)" in no_eval.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
