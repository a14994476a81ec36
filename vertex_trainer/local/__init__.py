"""Run a rendered CustomJob on this machine, as Vertex AI would run it (`submit --local`).

Input is the very object `submit` sends (the CustomJob REST body); every worker-pool replica
becomes a local process with the environment Vertex AI sets. One job per module, one way down:

- `cluster`: the CustomJob -> `Replica`s (argv, CLUSTER_SPEC, TF_CONFIG on loopback ports,
  AIP_* directories), and the preconditions (gs:// route, importable command);
- `supervisor`: the processes (own sessions, PR_SET_PDEATHSIG, stop with SIGTERM then SIGKILL,
  signal handling); knows nothing about display;
- `netns`: the private network a cluster's replicas share (TensorFlow's servers bind every
  interface; only loopback exists there), the relays into it, or the line saying why not;
- `display`: prefixed lines, live progress, the summary;
- `run`: `run_local` over the three, the run record, `metrics.json`, `LocalResult`.

The environment is data: `Settings.environ`, read at the edge; nothing here reads os.environ.
See docs/local.md.

The names below are loaded on first use (PEP 562): importing one light module of the package
(`local.display`, `local.layout`, `local.runlog`) does not import the runner, and through it the
spec's models; `vertex-trainer --help` imports `local.display` (and the `local.failure` it uses)
and nothing else of it (tests/architecture/test_architecture_help_imports.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vertex_trainer import interface

if TYPE_CHECKING:  # pragma: no cover
    from vertex_trainer.contract import SUCCEEDED
    from vertex_trainer.local.cluster import (
        Replica,
        build_replicas,
        check_gcs_route,
        command_of,
        output_dirs,
        pool_env,
        pools_of,
        references_gcs,
    )
    from vertex_trainer.local.display import parse_progress
    from vertex_trainer.local.run import (
        CANCELLED,
        FAILED,
        LocalResult,
        local_job_id,
        read_metrics,
        run_local,
        save_run_record,
    )
    from vertex_trainer.local.supervisor import Supervisor, stop_all

__all__ = [
    "CANCELLED",
    "FAILED",
    "SUCCEEDED",
    "LocalResult",
    "Replica",
    "Supervisor",
    "build_replicas",
    "check_gcs_route",
    "command_of",
    "local_job_id",
    "output_dirs",
    "parse_progress",
    "pool_env",
    "pools_of",
    "read_metrics",
    "references_gcs",
    "run_local",
    "save_run_record",
    "stop_all",
]


# Each public name -> the module of this package that holds it (SUCCEEDED: contract's, through run).
if not TYPE_CHECKING:  # mypy sees the imports above; the names resolve on first use
    __getattr__, __dir__ = interface.exports(
        __name__,
        {
            "CANCELLED": "run",
            "FAILED": "run",
            "LocalResult": "run",
            "Replica": "cluster",
            "SUCCEEDED": "run",
            "Supervisor": "supervisor",
            "build_replicas": "cluster",
            "check_gcs_route": "cluster",
            "command_of": "cluster",
            "local_job_id": "run",
            "output_dirs": "cluster",
            "parse_progress": "display",
            "pool_env": "cluster",
            "pools_of": "cluster",
            "read_metrics": "run",
            "references_gcs": "cluster",
            "run_local": "run",
            "save_run_record": "run",
            "stop_all": "supervisor",
        },
    )
