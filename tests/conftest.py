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
