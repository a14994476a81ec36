"""`python -m trainer.task`: train an image classifier from TFRecords (docs/contract.md section 4).

run(): parse flags -> strategy -> precision policy -> plan (files, steps, LR) and save the resolved
config -> datasets (or synthetic batches), get_next timed -> build and compile inside
strategy.scope() -> fit (checkpoints for preemption, TensorBoard, progress) and evaluate -> export
(chief only; other workers to a temp dir) -> metrics.json -> the throughput verdict
(trainer/throughput.py). Each stage is one function below.

Exit codes: 0 success, 2 bad flags or data, 143 stopped by SIGTERM after saving a checkpoint
(trainer/checkpoint.py), 1 anything else.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import posixpath
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from typing import Any

from trainer import keras_choice
from trainer.config import TrainConfig, UsageError, parse_flags
from trainer.log import log
from trainer.plan import Plan, check_local_data, plan_training
from trainer.plan import count_steps as count_steps  # tests import it from here


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        cfg = parse_flags(argv)
    except UsageError as e:
        print(f"error: {e} (see python -m trainer.task --help)", file=sys.stderr, flush=True)
        return 2
    from trainer.strategy import slice_host
    from trainer.tpu_slice import SliceError

    try:  # a local data pattern that matches nothing: said before TensorFlow loads
        host = slice_host(cfg.strategy, os.environ)
        if host is None or host.is_chief:  # the host that lists the files (plan_training)
            check_local_data(cfg)
        cfg = keras_choice.select(cfg)  # before anything imports TensorFlow or Keras
    except (UsageError, SliceError) as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2
    # Quiet TensorFlow's C++ start-up banner unless the job's env asks otherwise; it must be set
    # before the first TensorFlow import (trainer.data imports it).
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        from trainer.checkpoint import Preempted
        from trainer.data import DataError
        from trainer.strategy import ClusterError
    except ModuleNotFoundError as e:  # outside the image: trainer._keras says what to install
        if e.name not in ("tensorflow", "tf_keras", "keras"):
            raise
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1

    try:
        run(cfg)
    except (UsageError, DataError, ClusterError, SliceError) as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2
    except Preempted as e:
        print(f"error: stopped: {e}", file=sys.stderr, flush=True)
        return 128 + 15  # as if SIGTERM had ended the process: it did, after the checkpoint
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr, flush=True)
        return 1
    except Exception as e:
        traceback.print_exc()
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        print(
            f"error: training failed: {type(e).__name__}: {first}",
            file=sys.stderr,
            flush=True,
        )
        return 1
    return 0


def run(cfg: TrainConfig) -> dict:
    """Train, evaluate and export as `cfg` says; returns the metrics (written by the chief).

    On a multi-host TPU slice (trainer/tpu_slice.py) host 0 trains, beside its own TPU server
    (a child process), and writes the done file at the end; hosts 1 .. n-1 serve their TPU until
    it exists, and return no metrics.
    """
    from trainer import strategy, tpu_slice

    if cfg.keras == "auto":  # main() resolves it; a direct caller gets the same choice
        cfg = keras_choice.select(cfg)
    host = strategy.slice_host(cfg.strategy, os.environ)
    if host is None:
        return _train(cfg)
    done = tpu_slice.done_path(output_base(cfg.model_dir))
    if not host.is_chief:
        from trainer import tpu_server

        tpu_server.serve(host, done)
        log("done (a TPU slice host: host 0 writes the model and metrics)")
        return {}
    server = subprocess.Popen([sys.executable, "-m", "trainer.tpu_server", done])
    # The client drives the TPUs through the hosts' servers; it must not open host 0's TPU itself.
    os.environ["TPU_LOAD_LIBRARY"] = "0"
    try:
        return _train(cfg)
    finally:
        from trainer import tpu_server

        tpu_server.mark_done(done)
        server.terminate()
        server.wait()


def _train(cfg: TrainConfig) -> dict:
    """run() on one host, or on host 0 of a TPU slice (the client of every host's TPU)."""
    # Bound the read-ahead buffer of every open gs:// file before TF's GCS filesystem starts.
    os.environ.setdefault("GCS_READ_CACHE_BLOCK_SIZE_MB", str(cfg.gcs_read_block_mb))
    from trainer import (
        _keras,  # the Keras keras_choice.select chose (TF_USE_LEGACY_KERAS), before TensorFlow loads
        callbacks,
        factory,
        loops,
        synthetic,
        throughput,
    )
    from trainer._keras import keras

    strat, info = setup_runtime(cfg)
    policy, capability = set_precision(cfg, info)
    keras.utils.set_random_seed(cfg.seed)
    plan = plan_training(cfg, info)
    save_resolved_config(cfg, info, plan, policy, capability)

    # host counters: outside the strategy's scope
    meter = throughput.InputWaitMeter(cfg.batch_size, plan.steps_per_execution)
    train_ds, eval_ds, skipped = make_datasets(cfg, strat, plan)
    # a synthetic run's steps read its one batch, captured (trainer/synthetic.py): no tf.data in the step
    timed = meter.wrap(synthetic.source(train_ds, info.kind) if cfg.synthetic_data else train_ds)
    train_ds = keras_choice.fit_view(train_ds, timed) if _keras.KERAS3 else timed
    with strat.scope():
        model = build_and_compile(
            cfg,
            policy,
            plan.schedule(),
            steps_per_execution=plan.steps_per_execution,
            jit_compile=plan.jit_compile,
        )
        if not _keras.KERAS3 and info.kind != "tpu" and not factory.is_factory(cfg.model):
            loops.build_optimizer(model)  # not inside the first step: a second trace of it
            # what build_and_compile's model returns per step: its loss and metrics
            loops.trace_once(model, ["loss", "accuracy"])  # the training step traced once, not twice
    if info.device == "gpu":
        meter.sync_on(model)  # asynchronous device: time the wait from the end of the previous step
    log(
        f"model {cfg.model}: {model.count_params():,} parameters, precision {policy}, "
        f"global batch {cfg.batch_size}, peak lr {plan.peak_lr:g}, {plan.steps_per_epoch} steps/epoch "
        f"x {cfg.epochs} epochs, steps_per_execution {plan.steps_per_execution}"
    )

    outcome = fit_and_evaluate(cfg, info, plan, model, train_ds, eval_ds, meter)
    metrics = collect_metrics(cfg, info, plan, policy, outcome, skipped)

    export(model, cfg, is_chief=info.is_chief, task=f"{info.task_type}_{info.task_index}")
    if info.is_chief:
        metrics_path = join(output_base(cfg.model_dir), "metrics.json")
        write_json(metrics_path, metrics)
        # Only a tuning trial reports (Vertex sets CLOUD_ML_TRIAL_ID; local trials and tests set
        # the metric file): a plain run has nobody listening.
        tuning = bool(os.environ.get("CLOUD_ML_TRIAL_ID") or os.environ.get("CLOUD_ML_HP_METRIC_FILE"))
        if (
            tuning
            and metrics["eval_accuracy"] is not None
            and callbacks.report_hypertune(cfg.hypertune_metric, metrics["eval_accuracy"], plan.total_steps)
        ):
            log(f"reported {cfg.hypertune_metric}={metrics['eval_accuracy']:.4f} to hyperparameter tuning")
        log(f"exported model to {cfg.model_dir}; metrics in {metrics_path}")
    else:
        log("done (not the chief: the model and metrics are written by the chief)")
    log(
        throughput.verdict(
            metrics,
            synthetic=cfg.synthetic_data,
            devices=info.replicas // max(1, info.workers),
            device=info.device,
            data_threads=plan.train_cfg.threads,
        )
    )
    return metrics


def setup_runtime(cfg: TrainConfig):
    """Thread pools, CPU replicas and the distribution strategy: all before TF's runtime starts."""
    import tensorflow as tf

    from trainer import strategy

    if cfg.intra_op_threads:
        tf.config.threading.set_intra_op_parallelism_threads(cfg.intra_op_threads)
    if cfg.inter_op_threads:
        tf.config.threading.set_inter_op_parallelism_threads(cfg.inter_op_threads)
    if cfg.cpu_replicas > 1 and not tf.config.list_physical_devices("GPU"):
        strategy.split_cpu(cfg.cpu_replicas)
    strat, info = strategy.create(cfg.strategy, cpu_replicas=cfg.cpu_replicas)
    log(
        f"strategy={info.kind} replicas={info.replicas} workers={info.workers} device={info.device} "
        f"task={info.task_type}:{info.task_index} chief={info.is_chief}"
    )
    if cfg.batch_size % info.replicas:
        raise UsageError(
            f"--batch-size={cfg.batch_size} is not divisible by the "
            f"{info.replicas} replicas; use a multiple of {info.replicas}"
        )
    return strat, info


def set_precision(cfg: TrainConfig, info):
    """The mixed-precision policy for this device (auto: bf16 on TPU/Ampere+, fp16 on V100/T4)."""
    from trainer import precision

    capability = precision.gpu_compute_capability() if info.device == "gpu" else None
    policy = precision.resolve(cfg.precision, info.device, capability)
    precision.apply(policy)
    return policy, capability


def save_resolved_config(cfg: TrainConfig, info, plan: Plan, policy: str, capability) -> None:
    """Log the resolved run and keep it beside the model (chief): trainer_config.json."""
    import tensorflow as tf

    from trainer._keras import keras

    resolved = {
        "flags": cfg.to_dict(),
        "precision": policy,
        "strategy": info.kind,
        "replicas": info.replicas,
        "workers": info.workers,
        "device": info.device,
        "gpu_compute_capability": list(capability) if capability else None,
        "steps_per_epoch": plan.steps_per_epoch,
        "steps_per_execution": plan.steps_per_execution,
        "total_steps": plan.total_steps,
        "warmup_steps": plan.warmup_steps,
        "peak_learning_rate": plan.peak_lr,
        "eval_steps": plan.eval_steps,
        "train_files": len(plan.train_files),
        "eval_files": len(plan.eval_files),
        "jit_compile": plan.jit_compile,
        "data_threads": plan.train_cfg.threads,
        "data_nice": cfg.data_nice,
        "keras": keras.__version__,
        "tensorflow": tf.__version__,
    }
    # The whole of it (flags and all, ~2 KB) goes to the run's record, trainer_config.json beside
    # the outputs; the log gets one short line.
    where = "written by the chief"
    if info.is_chief:
        where = join(output_base(cfg.model_dir), "trainer_config.json")
        write_json(where, resolved)
    log(
        f"resolved config: {cfg.model} {cfg.image_size}px, {len(plan.train_files)} train / "
        f"{len(plan.eval_files)} eval files, {info.kind} strategy, {policy}, TensorFlow {tf.__version__}, "
        f"Keras {keras.__version__}; every setting in {where}"
    )


def make_datasets(cfg: TrainConfig, strat, plan: Plan):
    """(train, eval or None, skipped-records counter or None), distributed over the replicas."""
    import tensorflow as tf

    skipped = tf.Variable(0, dtype=tf.int64, trainable=False) if cfg.skip_corrupt else None
    train_ds = strat.distribute_datasets_from_function(
        input_fn(
            plan.train_files,
            plan.train_cfg,
            cfg.batch_size,
            skipped,
            repeat=False,
            synthetic=cfg.synthetic_data,
        )
    )
    eval_ds = (
        strat.distribute_datasets_from_function(
            input_fn(plan.eval_files, plan.eval_cfg, cfg.batch_size, skipped, repeat=True)
        )
        if plan.eval_files
        else None
    )
    return train_ds, eval_ds, skipped


@dataclasses.dataclass
class Outcome:
    history: Any
    eval_results: dict
    train_seconds: float
    eval_seconds: float
    progress: Any
    meter: Any
    checkpoint: Any
    data_threads_niced: int = 0


def fit_and_evaluate(cfg: TrainConfig, info, plan: Plan, model, train_ds, eval_ds, meter) -> Outcome:
    """fit() with checkpoints for preemption (trainer/checkpoint.py: time budget, epoch ends,
    SIGTERM; a rerun resumes), input wait, progress and TensorBoard; then eval."""
    from trainer import callbacks
    from trainer._keras import keras
    from trainer.checkpoint import PreemptionCheckpoint
    from trainer.corrupt import data_errors
    from trainer.priority import DataThreadPriority

    checkpoint = PreemptionCheckpoint(
        cfg.checkpoint_dir,
        steps_per_epoch=plan.steps_per_epoch,
        interval_secs=cfg.checkpoint_interval_secs,
        timed=info.workers == 1,
    )
    progress = callbacks.Progress(
        global_batch=cfg.batch_size,
        steps_per_epoch=plan.steps_per_epoch,
        epochs=cfg.epochs,
        interval_secs=cfg.log_interval_secs,
        backup_dir=cfg.checkpoint_dir,
        meter=meter,
        checkpoint=checkpoint,
    )
    profile = profile_batch(cfg, plan)
    if profile is not None:
        meter.profiling(*profile)
    # Made now, before fit() starts the training iterator: the threads that exist are the model's.
    priority = DataThreadPriority(cfg.data_nice)
    # The meter first (it times each execution before anything else runs after it), then the
    # checkpoint (an epoch's progress line is out only once it is saved), then progress.
    fit_callbacks = [meter, priority, checkpoint, progress]
    if info.is_chief:
        # No graph: writing it lands after the first execution, inside the measured time.
        fit_callbacks.append(
            keras.callbacks.TensorBoard(
                log_dir=cfg.tensorboard_dir,
                update_freq="epoch",
                profile_batch=profile or 0,
                write_graph=False,
            )
        )
    checkpoint.install_sigterm_handler()
    started = time.perf_counter()
    try:
        with data_errors(plan.train_files + plan.eval_files, plan.train_cfg):
            history = model.fit(
                train_ds,
                epochs=cfg.epochs,
                steps_per_epoch=plan.steps_per_epoch,
                callbacks=fit_callbacks,
                verbose=0,
                shuffle=False,  # the input pipeline shuffles (Keras 3 warns that it ignores it)
            )
    finally:
        checkpoint.restore_sigterm_handler()
    train_seconds = time.perf_counter() - started
    eval_results, eval_started = {}, time.perf_counter()
    if eval_ds is not None:
        with data_errors(plan.train_files + plan.eval_files, plan.train_cfg):
            eval_results = model.evaluate(eval_ds, steps=plan.eval_steps, verbose=0, return_dict=True)
        log(
            f"eval: loss={eval_results['loss']:.4f} accuracy={eval_results['accuracy']:.4f} "
            f"over {plan.eval_steps * cfg.batch_size} examples"
        )
    return Outcome(
        history,
        eval_results,
        train_seconds,
        time.perf_counter() - eval_started,
        progress,
        meter,
        checkpoint,
        priority.niced,
    )


def profile_batch(cfg: TrainConfig, plan: Plan) -> tuple[int, int] | None:
    """Keras TensorBoard's `profile_batch` for --profile-steps=A,B (None: no profile): the
    executions that hold steps A..B (its batch hooks count executions). The profiler writes
    <tensorboard dir>/plugins/profile/<run>/<host>.xplane.pb (tf-keras; Keras 3: under train/)."""
    from trainer.executions import parse_profile_steps, profile_executions

    try:
        window = parse_profile_steps(cfg.profile_steps, plan.total_steps)
    except ValueError as e:
        raise UsageError(f"--profile-steps {e}") from None
    if window is None:
        return None
    first, last = profile_executions(window, plan.steps_per_execution)
    log(
        f"profiling steps {window[0]}-{window[1]}: executions {first}-{last} of "
        f"{plan.steps_per_execution} steps (steps {(first - 1) * plan.steps_per_execution + 1}-"
        f"{last * plan.steps_per_execution}) into {cfg.tensorboard_dir}"
    )
    return first, last


def collect_metrics(cfg: TrainConfig, info, plan: Plan, policy: str, outcome: Outcome, skipped) -> dict:
    """metrics.json (docs/contract.md section 4 and more).

    train_examples_per_sec is the steady-state rate: from the end of the first (tracing,
    compiling) execution to the end of training, less checkpoint time (trainer/throughput.py
    `rates`); wall_examples_per_sec is every step over all of fit(); compile_seconds,
    checkpoint_seconds and eval_seconds say where the rest went.
    """
    from trainer import throughput

    history, progress, eval_results = outcome.history.history, outcome.progress, outcome.eval_results
    losses = history.get("loss") or []
    final_loss = losses[-1] if losses else progress.last_loss
    evaluated = bool(plan.eval_files)
    timing = throughput.rates(
        outcome.meter.executions, cfg.batch_size, outcome.train_seconds, outcome.checkpoint.seconds_between
    )
    steady = timing["steady_examples_per_sec"]
    return {
        "global_batch_size": cfg.batch_size,
        "learning_rate": plan.peak_lr,
        "base_learning_rate": cfg.learning_rate,
        "precision": policy,
        "steps_per_execution": plan.steps_per_execution,
        "steps": plan.total_steps,
        "steps_per_epoch": plan.steps_per_epoch,
        "epochs": cfg.epochs,
        "initial_epoch": progress.first_epoch or 0,
        "train_examples_per_sec": steady,
        "steady_examples_per_sec": steady,  # the same figure (performance/benchmark.py reads this name)
        "wall_examples_per_sec": timing["wall_examples_per_sec"],
        "epoch_examples_per_sec": progress.epoch_rates,
        "step_time_ms": timing["steady_step_time_ms"],
        "train_seconds": outcome.train_seconds,
        "compile_seconds": timing["compile_seconds"],
        "eval_seconds": round(outcome.eval_seconds, 4) if evaluated else 0.0,
        **outcome.checkpoint.summary(),  # checkpoint_seconds, checkpoints, checkpoint_interval_secs
        "final_train_loss": _finite(final_loss),
        "final_train_accuracy": _finite((history.get("accuracy") or [None])[-1]),
        "eval_accuracy": _finite(eval_results.get("accuracy")),
        "eval_loss": _finite(eval_results.get("loss")),
        "eval_examples": plan.eval_steps * cfg.batch_size if evaluated else 0,
        "replicas": info.replicas,
        "workers": info.workers,
        "strategy": info.kind,
        "device": info.device,
        "model": cfg.model,
        "image_size": cfg.image_size,
        "skipped_records": int(skipped.numpy()) if skipped is not None else 0,
        "model_dir": cfg.model_dir,
        "synthetic_data": cfg.synthetic_data,
        "data_threads_niced": outcome.data_threads_niced,  # trainer/priority.py (--data-nice)
        # input_wait_fraction, host_cpu_busy_fraction, host_overhead_fraction, what they cover
        **outcome.meter.summary(outcome.checkpoint.seconds_between),
    }


def input_fn(
    files: list[str], pipeline_cfg, global_batch: int, skipped, *, repeat: bool, synthetic: bool = False
):
    """The per-input-pipeline dataset function for strategy.distribute_datasets_from_function."""
    from trainer import data

    def fn(ctx):
        if synthetic:
            return data.synthetic_dataset(
                pipeline_cfg, ctx.get_per_replica_batch_size(global_batch), shard_index=ctx.input_pipeline_id
            )
        ds = data.build_dataset(
            files,
            pipeline_cfg,
            ctx.get_per_replica_batch_size(global_batch),
            num_shards=ctx.num_input_pipelines,
            shard_index=ctx.input_pipeline_id,
            skipped=skipped,
        )
        # Eval repeats so every worker always has its eval_steps batches (no uneven ends).
        return ds.repeat() if repeat else ds

    return fn


def build_and_compile(
    cfg: TrainConfig, policy: str, schedule, *, steps_per_execution: int, jit_compile: bool
):
    """Model, optimizer (loss-scaled for float16), loss and metrics; call inside strategy.scope()."""
    from trainer import schedules
    from trainer._keras import keras
    from trainer.model import build_model

    model = build_model(
        cfg.model, num_classes=cfg.num_classes, image_size=cfg.image_size, sync_batch_norm=cfg.sync_batch_norm
    )
    optimizer = schedules.make_optimizer(
        cfg.optimizer, schedule, momentum=cfg.momentum, weight_decay=cfg.weight_decay
    )
    if policy == "mixed_float16":
        optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)  # dynamic loss scaling
    model.compile(
        optimizer=optimizer,
        loss=make_loss(cfg.num_classes, cfg.label_smoothing),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        steps_per_execution=steps_per_execution,
        jit_compile=jit_compile,
    )
    return model


def make_loss(num_classes: int, label_smoothing: float):
    """Sparse categorical cross-entropy, with label smoothing when asked (tf-keras' sparse loss
    has none, so the labels are one-hot encoded for CategoricalCrossentropy)."""
    import tensorflow as tf

    from trainer._keras import keras

    if not label_smoothing:
        return keras.losses.SparseCategoricalCrossentropy()

    def smoothed_crossentropy(y_true, y_pred):
        labels = tf.one_hot(tf.cast(tf.reshape(y_true, [-1]), tf.int32), num_classes)
        return keras.losses.categorical_crossentropy(labels, y_pred, label_smoothing=label_smoothing)

    return smoothed_crossentropy


def export(model, cfg: TrainConfig, *, is_chief: bool, task: str) -> None:
    """SavedModel with the serving signatures (trainer/export.py) into cfg.model_dir on the chief;
    other workers save to a temp dir and delete it.

    Every MultiWorkerMirroredStrategy worker must take part in saving (it may run collectives),
    so all of them save the same thing, but only the chief's copy is kept.
    """
    import tensorflow as tf

    from trainer import export as export_lib

    target = cfg.model_dir if is_chief else tempfile.mkdtemp(prefix=f"trainer-{task}-")
    try:
        export_lib.save(model, target, export_lib.ServingConfig.from_train_config(cfg))
    finally:
        if not is_chief:
            tf.io.gfile.rmtree(target)


def output_base(model_dir: str) -> str:
    """The base output directory: the parent of AIP_MODEL_DIR (<base>/model/)."""
    return posixpath.dirname(model_dir.rstrip("/")) or "."


def join(base: str, name: str) -> str:
    return posixpath.join(base, name)


def write_json(path: str, value: dict) -> None:
    import tensorflow as tf

    parent = posixpath.dirname(path)
    if parent and not tf.io.gfile.exists(parent):
        tf.io.gfile.makedirs(parent)
    with tf.io.gfile.GFile(path, "w") as f:
        f.write(json.dumps(value, indent=2, sort_keys=True) + "\n")


def _finite(value):
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


if __name__ == "__main__":
    from trainer.process_end import exit_now

    exit_now(main())
