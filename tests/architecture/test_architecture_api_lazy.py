"""`from vertex_trainer import api` is cheap (issue 44, imports at module top): the facade's names
load on first use, so the CLI can import it at the top of a command module and a command loads
only the API modules it calls. Each probe is a fresh interpreter (this one has loaded them all).
"""

from __future__ import annotations

import json
import subprocess
import sys
import types

from vertex_trainer import api


def _probe(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_importing_the_facade_loads_no_api_module_and_no_pydantic():
    found = _probe(
        "import json, sys\n"
        "from vertex_trainer import api\n"
        "names = sorted(api.__all__)\n"
        "print(json.dumps({'modules': sorted(sys.modules), 'dir': sorted(dir(api)), 'names': names}))"
    )
    loaded = [m for m in found["modules"] if m.startswith("vertex_trainer.api.") or m.startswith("pydantic")]
    assert loaded == []
    assert set(found["names"]) <= set(found["dir"])
    assert {"submit", "load_spec", "bench", "plan", "Job"} <= set(found["names"])


def test_one_name_loads_its_module_and_what_that_needs_only():
    found = _probe(
        "import json, sys\n"
        "from vertex_trainer import api\n"
        "api.parse_label\n"
        "api_modules = [m for m in sys.modules if m.startswith('vertex_trainer.api.')]\n"
        "print(json.dumps({'modules': sorted(api_modules)}))"
    )
    assert found["modules"] == ["vertex_trainer.api.inputs"]


def test_a_name_shared_by_a_module_and_a_function_stays_the_function():
    # Importing api/bench.py, api/plan.py ... binds each on the package; the facade keeps the name.
    import vertex_trainer.api.bench
    import vertex_trainer.api.cost
    import vertex_trainer.api.plan  # noqa: F401  (capacity's `plan` is the facade's)

    for name in api.__all__:
        value = getattr(api, name)
        assert not isinstance(value, types.ModuleType), name
        assert name in dir(api)
    assert api.bench.__module__ == "vertex_trainer.api.bench"
    assert api.plan.__module__ == "vertex_trainer.api.capacity"
    assert api.cost.__module__ == "vertex_trainer.api.cost"
    assert isinstance(api.core, types.ModuleType)  # other modules stay reachable as modules
