"""A careless user's out-of-range number is named in the refusal (issue 42, A1): every spec
error names the field, the value and the fix, but the value was left out whenever its digits
appeared anywhere in the message: `boot_disk.size_gb: 10` said only "Input should be greater
than or equal to 100" (its "10" is in "100"), `--set boot_disk.size_gb=1` the same. Now a value is
taken as named only where it stands as itself."""

from __future__ import annotations

import pytest
import yaml

from tests.cli_support import edge_env
from tests.shared import T4_JOB, cli_runner
from vertex_trainer.errors import SpecError


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ("boot_disk.size_gb=10", "boot_disk.size_gb: Input should be greater than or equal to 100 (got 10)"),
        ("boot_disk.size_gb=1", "boot_disk.size_gb: Input should be greater than or equal to 100 (got 1)"),
        ("replicas=25600", "replicas: Input should be less than or equal to 256 (got 25600)"),
        ("scheduling.strategy=spott", "(got 'spott')"),
        # a refusal that said no fix: now the forms that work, and what leaving it out means
        ("scheduling.timeout=0", "must be more than 0 seconds: e.g. 4h or 3d, or leave it out"),
    ],
)
def test_the_bad_value_is_always_named(tmp_path, setting, said):
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump(T4_JOB))
    done = cli_runner(edge_env(tmp_path), cwd=tmp_path)("validate", spec, "--set", setting)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert said in done.stderr


def test_a_value_named_in_the_message_is_not_repeated():
    assert str(SpecError("hardware", "unknown hardware preset 'h100x3'", value="h100x3")).count("h100x3") == 1
    assert str(SpecError("replicas", "must be at least 100", value=1)).endswith("(got 1)")
    assert str(SpecError("replicas", "1 is too few", value=1)) == "replicas: 1 is too few"
