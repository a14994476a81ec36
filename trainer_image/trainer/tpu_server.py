"""A TPU host's TensorFlow server in a multi-host slice (trainer/tpu_slice.py says why).

Hosts 1 .. n-1 of a slice run only this (task.run calls `serve`); host 0 runs it beside the
training program as `python -m trainer.tpu_server <done file>`. The server serves until host 0
writes the done file (tpu_slice.done_path), checked every TPU_SLICE_POLL_SECONDS (default 30).
"""

from __future__ import annotations

import os
import sys
import time

from trainer.log import log
from trainer.tpu_slice import SliceHost, from_env


def serve(host: SliceHost, done: str, *, poll_seconds: float | None = None) -> None:
    """Start this host's server (task `host.index` of the slice's job) and return once `done`
    exists."""
    import tensorflow as tf

    poll = poll_seconds if poll_seconds is not None else float(os.environ.get("TPU_SLICE_POLL_SECONDS", "30"))
    d = host.server_def()
    server = tf.distribute.Server(
        tf.train.ClusterSpec(d["cluster"]), job_name=d["job_name"], task_index=d["task_index"], start=True
    )
    log(
        f"tpu slice: host {host.index} of {host.hosts} serving {host.addresses[host.index]} "
        f"(job {d['job_name']}, task {d['task_index']}); waiting for {done}"
    )
    while not tf.io.gfile.exists(done):
        time.sleep(poll)  # the done file is on gs://: no event to wait on
    log(f"tpu slice: host {host.index}: host 0 has finished")
    del server


def mark_done(done: str) -> None:
    """Host 0: the run has ended (the other hosts' servers exit)."""
    import posixpath

    import tensorflow as tf

    tf.io.gfile.makedirs(posixpath.dirname(done))
    with tf.io.gfile.GFile(done, "w") as f:
        f.write("done\n")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m trainer.tpu_server <done file>", file=sys.stderr)
        return 2
    serve(from_env(os.environ), argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
