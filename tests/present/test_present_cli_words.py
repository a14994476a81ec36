"""Google's words end to end (issue 40 item 6): `validate` counts machines as Vertex AI's
replicaCount does and the GPUs they hold; a global batch splits over GPUs (one data-parallel
replica each), not over "replicas" that are machines. In this process (tests/cli_support.py)."""

from __future__ import annotations

import pytest

from tests.shared import spec_yaml, write_spec

pytestmark = pytest.mark.wire


def test_validate_of_two_8_gpu_machines_says_2_machines_and_16_gpus(run_cli, tmp_path):
    path = write_spec(tmp_path, spec_yaml(None, hardware="h100x8", replicas=2, scheduling=None))
    done = run_cli("validate", path)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("  hardware"))
    assert line == (
        "  hardware  h100x8: 2 machines (workerpool0: 1, workerpool1: 1) of a3-highgpu-8g "
        "with 8 x NVIDIA_H100_80GB each = 16 GPUs"
    )
    assert "replica" not in done.stdout


def test_a_batch_that_does_not_split_names_the_gpus(run_cli, tmp_path):
    path = write_spec(
        tmp_path,
        spec_yaml(None, hardware="h100x8", replicas=2, scheduling=None, trainer={"batch_size": 100}),
    )
    refused = run_cli("validate", path)
    assert refused.returncode == 2
    assert (
        "trainer.batch_size: the global batch 100 does not split evenly over 16 GPUs (2 machines x 8), "
        "one data-parallel replica each" in refused.stderr
    )
    assert "use a multiple of 16, e.g. 112" in refused.stderr
