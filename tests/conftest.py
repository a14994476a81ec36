"""Suite-wide rules.

A test that imports TensorFlow in this process must carry the `trainer` marker, so that
`make test-fast` (`-m "not trainer and not slow"`) never pays for it. The hook below turns a
forgotten marker into an error that names the test.
"""

from __future__ import annotations

import sys

import pytest


@pytest.fixture(autouse=True)
def _tensorflow_needs_the_trainer_marker(request):
    had_tf = "tensorflow" in sys.modules
    yield
    if not had_tf and "tensorflow" in sys.modules and request.node.get_closest_marker("trainer") is None:
        pytest.fail(f"{request.node.nodeid} imported TensorFlow without the `trainer` marker: add "
                    "@pytest.mark.trainer (or pytestmark) to it", pytrace=False)


# -- the fixtures every folder shares (tests/shared.py has what they are built from) ------------

@pytest.fixture
def fake():
    """The fake Vertex AI on loopback (vertex_trainer.emulators.vertex), one per test."""
    from vertex_trainer.emulators.vertex import FakeVertex

    with FakeVertex() as server:
        yield server


@pytest.fixture
def settings(fake):
    """Settings for the client code against `fake`: fast retries and polls (tests/shared.py)."""
    from tests.shared import fake_settings

    return fake_settings(fake)


@pytest.fixture
def cli_env(fake, tmp_path) -> dict[str, str]:
    """The environment of a CLI subprocess: the fake Vertex AI, fast retries and polls, no gcloud
    configuration (tests/cli_support.py)."""
    from tests.cli_support import edge_env

    return edge_env(tmp_path, VERTEX_TRAINER_API_ENDPOINT=fake.url)


@pytest.fixture
def run_cli(cli_env):
    """Run `vertex-trainer ARGS...` in a subprocess with cli_env (`env=` adds to it); returns the
    CompletedProcess (text)."""
    from tests.shared import cli_runner

    return cli_runner(cli_env)


@pytest.fixture
def popen_cli(cli_env):
    """Start `vertex-trainer ARGS...` without waiting; whatever still runs is killed at the end."""
    from tests.shared import CliStarter

    starter = CliStarter(cli_env)
    yield starter
    starter.stop()
