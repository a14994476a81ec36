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
"""

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
