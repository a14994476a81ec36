"""Suite-wide rules.

A test that imports TensorFlow in this process must carry the `trainer` marker, so that
`make test-fast` (`-m "not trainer and not slow"`) never pays for it. The hook below turns a
forgotten marker into an error that names the test.
"""

from __future__ import annotations

import signal
import sys

import pytest

# A suite started in the background of a script (`make test &`, a CI step's `cmd &`) inherits
# SIGINT ignored, and an ignored signal stays ignored across exec: every CLI the tests start
# would then ignore the Ctrl-C the tests send it (test_ctrl_c_while_waiting hung so). A handler
# is reset to the default on exec, so the children get Ctrl-C back whatever started the suite.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _tensorflow_needs_the_trainer_marker(request):
    had_tf = "tensorflow" in sys.modules
    yield
    if not had_tf and "tensorflow" in sys.modules and request.node.get_closest_marker("trainer") is None:
        pytest.fail(
            f"{request.node.nodeid} imported TensorFlow without the `trainer` marker: add "
            "@pytest.mark.trainer (or pytestmark) to it",
            pytrace=False,
        )


# -- the fixtures every folder shares (tests/shared.py has what they are built from) ------------


@pytest.fixture
def fake():
    """The fake Vertex AI on loopback (vertex_trainer.emulators.vertex), one per test."""
    # The fake parses bodies with aiplatform_v1, imported at its first request: seconds on a busy
    # machine, longer than a CLI's read timeout. Imported here, once per test process, so the
    # first test of a process (of a pytest-xdist worker too) does not lose its first answer.
    from google.cloud import aiplatform_v1  # noqa: F401

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
    """The environment of a CLI run: the fake Vertex AI, fast retries and polls, no gcloud
    configuration (tests/cli_support.py)."""
    from tests.cli_support import edge_env

    return edge_env(tmp_path, VERTEX_TRAINER_API_ENDPOINT=fake.url)


@pytest.fixture
def run_cli(cli_env):
    """Run `vertex-trainer ARGS...` in this process as a subprocess with cli_env would run
    (`env=` adds to it; tests/cli_support.py `invoke`); returns the CompletedProcess (text)."""
    from tests.shared import cli_runner

    return cli_runner(cli_env)


@pytest.fixture
def run_cli_process(cli_env):
    """`run_cli` in a real subprocess (the console script), for tests whose subject is the process:
    the exit code a shell sees, start-up."""
    from tests.shared import cli_runner

    return cli_runner(cli_env, process=True)


@pytest.fixture
def popen_cli(cli_env):
    """Start `vertex-trainer ARGS...` without waiting; whatever still runs is killed at the end."""
    from tests.shared import CliStarter

    starter = CliStarter(cli_env)
    yield starter
    starter.stop()


# -- pytest-xdist (`make test`: -n 3 --dist loadgroup --no-loadscope-reorder, the Makefile) -------
# Each unit of work goes to one worker whole. A module is a unit (its module fixtures are built
# once); so is each folder below, whose session fixtures train a model, write a data set or start a
# server that several of its modules share. The docs examples are a unit each (their data is
# shared across workers: tests/docs/harness.py), but the examples that hold the same fixed port or
# file (`fake-vertex --port 8765`, /tmp/prices.json) are one unit (harness.unit_of). The units holding a
# `slow` test are handed out first, so that a long one does not start last and end the run on one
# worker.
ONE_UNIT_FOLDERS = frozenset({"serving", "throughput", "dataprep"})
# A module that imports a heavy library in this process joins a unit that imports it too, so that
# one worker pays the import instead of two: the Vertex AI SDK (~4 s of CPU under coverage), Beam
# and TensorFlow (~2 s and ~5.5 s).
JOINS = {
    "house/test_house_resources.py": "sandbox/test_sandbox_clients.py",  # the SDK
    "foundation/test_foundation_data_cli.py": "dataprep",  # data convert's Beam, TensorFlow's reader
}


def _unit(item, tests) -> str:
    from pathlib import Path

    parts = Path(item.path).relative_to(tests).parts
    if "/".join(parts) in JOINS:
        return JOINS["/".join(parts)]
    if parts[0] in ONE_UNIT_FOLDERS:
        return parts[0]
    block = getattr(getattr(item, "callspec", None), "params", {}).get("block")
    if parts[0] == "docs" and block is not None:
        from tests.docs.harness import unit_of

        return unit_of(block) or f"docs:{block.id}"
    return "/".join(parts)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    if not hasattr(config, "workerinput"):  # not an xdist worker: nothing to group
        return
    from pathlib import Path

    tests = Path(__file__).parent
    units = {}
    for item in items:
        units[id(item)] = _unit(item, tests)
        item.add_marker(pytest.mark.xdist_group(units[id(item)]))
    slow = {units[id(i)] for i in items if i.get_closest_marker("slow")}
    items.sort(key=lambda i: units[id(i)] not in slow)  # stable: each unit's order is kept


def pytest_configure(config):
    """`--dist loadgroup` needs the pytest pyproject.toml pins: on pytest 9.2 pytest-xdist 3.8
    cannot put a test's group in its node id (pytest-dev/pytest-xdist#1386), and the units above
    would be split across the workers without a word (a trained model built once per worker)."""
    if config.getoption("dist", "no") != "loadgroup" or hasattr(config, "workerinput"):
        return
    from packaging.version import Version  # pytest's own dependency

    if Version(pytest.__version__) >= Version("9.2.dev0"):
        raise pytest.UsageError(
            f"pytest {pytest.__version__}: pytest-xdist's --dist loadgroup does not group tests on "
            "pytest 9.2 and later (pytest-dev/pytest-xdist#1386). `make install` installs the "
            "pinned pytest; or run the suite on one process: make test PYTEST_ARGS=-n0"
        )
