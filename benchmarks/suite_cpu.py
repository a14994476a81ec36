"""A pytest plugin that writes each test's wall time and CPU seconds, one JSON line a test: its own
process's (`RUSAGE_SELF`) and the children it reaped meanwhile (`RUSAGE_CHILDREN`: trainers,
CLIs, sandboxes, with their own descendants). The figures of benchmarks/RESULTS-suite.md.

    PYTHONPATH=benchmarks env -u PYTHONDONTWRITEBYTECODE SUITE_CPU=/tmp/suite.jsonl \\
        .venv/bin/python -m pytest -q -n0 -p no:cacheprovider -p suite_cpu -m "trainer or slow" tests

A child that outlives its test (a module's sandbox) is charged to the test during which it is reaped.
"""

from __future__ import annotations

import json
import os
import resource
import time

import pytest

_OUT = os.environ.get("SUITE_CPU", "suite-cpu.jsonl")


def _now() -> tuple[float, float, float]:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.monotonic(), own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before = _now()
    yield
    after = _now()
    line = {
        "id": item.nodeid,
        **{k: round(b - a, 2) for k, a, b in zip(("wall", "self", "kids"), before, after, strict=True)},
    }
    with open(_OUT, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
