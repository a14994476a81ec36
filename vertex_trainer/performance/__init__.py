"""Bench and profiling: how fast the job trains, where its step time goes, and how busy the
accelerator is (docs/performance.md; docs/contract.md section 9).

    benchmark.py           `bench`: the job run briefly on synthetic, then real data; reference speeds
    sweep.py               `bench --sweep FIELD=V1,V2`: one short run per value
    step_profile.py        `profile`: the profiler trace read (xprof): the step's breakdown, top ops
    profile_trace.py       where a run's traces are, and copies of one to read
    tensorboard_server.py  `tensorboard`: TensorBoard on 127.0.0.1 over a run's logs
    bench_text.py, profile_text.py, utilization_text.py   the same for people

The utilization series come from vertex/utilization.py (Cloud Monitoring). Other capabilities use
the names below only.
"""

from typing import TYPE_CHECKING

from vertex_trainer import interface

if TYPE_CHECKING:
    from vertex_trainer.performance.benchmark import reference_for

__all__ = ["reference_for"]
if not TYPE_CHECKING:  # mypy sees the imports above; the names resolve on first use
    __getattr__, __dir__ = interface.exports(__name__, {"reference_for": "benchmark"})
