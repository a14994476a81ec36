"""`report` of a run whose epochs someone else wrote: the TensorBoard event files of a cloud job's
`<output>/logs` (a shared bucket, read when the log has no epoch), or a run folder copied from
elsewhere. A 10 MB event file of 200,000 `epoch_loss` scalars held `report` for over twelve
minutes at 5 GB: tensorboard's reader kept every scalar, and each curve set one labelled tick per
epoch (5,000 epochs: 37 s of drawing). A FIFO named like an event file held it for good.

Now the event files are looked at first (regular files, at most MAX_EVENT_BYTES together; only
the epoch tags kept, at most MAX_POINTS steps of each; the
rest is a note on the page), a curve draws at most MAX_PLOTTED epochs (evenly kept, the last one
too) and labels each epoch only up to MAX_EPOCH_TICKS. The tests count what is drawn, not time.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from vertex_trainer import api
from vertex_trainer.reporting import bounded_read as report_read
from vertex_trainer.reporting import plots as report_plots
from vertex_trainer.reporting import run_data as report
from vertex_trainer.reporting.run_data import Epoch, RunData

DATA = Path(__file__).resolve().parents[1] / "report" / "data"
EPOCHS = 20_000


@pytest.fixture
def run(tmp_path) -> Path:
    shutil.copytree(DATA / ".vertex-trainer", tmp_path / ".vertex-trainer")
    run = Path(shutil.copytree(DATA / "quickstart", tmp_path / "quickstart"))
    shutil.rmtree(run / "logs")
    return run


def _log(epochs: int) -> str:
    return "".join(
        f"2026-12-02T04:04:55.690883Z progress epoch={n}/{epochs} step=4/4 examples_per_sec=229.7 "
        f"loss={1 / n:.6f} accuracy=0.5 input_wait_fraction=0.1\n"
        for n in range(1, epochs + 1)
    )


def _drawn(data: RunData, chart_id: str):
    plt = report_plots._pyplot()
    chart = next(c for c in report_plots.charts(data) if c.id == chart_id)
    fig, ax = plt.subplots()
    try:
        chart.draw(ax)
        return [list(line.get_xdata()) for line in ax.lines], list(ax.get_xticks())
    finally:
        plt.close(fig)


def test_a_curve_of_many_epochs_draws_a_bounded_number_of_points_and_ticks():
    data = RunData(
        source="x",
        name="x",
        epochs=tuple(Epoch(n, loss=1 / n, accuracy=0.5) for n in range(1, EPOCHS + 1)),
    )
    for chart in ("loss", "accuracy"):
        (xs, *_), ticks = _drawn(data, chart)
        assert len(xs) <= report_plots.MAX_PLOTTED and xs[-1] == EPOCHS and xs[0] <= 10, chart
        assert len(ticks) <= 20, (chart, len(ticks))
    few = RunData(source="x", name="x", epochs=tuple(Epoch(n, loss=1 / n) for n in range(1, 4)))
    (xs, *_), ticks = _drawn(few, "loss")
    assert xs == [1, 2, 3] and ticks == [1, 2, 3]  # a short run keeps a tick an epoch


@pytest.mark.timeout(120)
def test_a_log_of_many_epochs_gives_a_page_of_bounded_size(run, tmp_path):
    (run.parent / ".vertex-trainer" / run.name / "logs" / "workerpool0-0.log").write_text(_log(3_000))
    out = Path(api.report(str(run), str(tmp_path / "page.html"))).read_text(encoding="utf-8")
    assert 'data-epochs="3000"' in out  # every epoch read and counted
    loss = re.search(r'<figure id="fig-loss".*?</figure>', out, re.S)
    assert loss is not None
    assert loss[0].count("<use ") <= report_plots.MAX_PLOTTED + 10  # a marker a drawn epoch
    assert loss[0].count("<text ") <= 40  # the ticks' labels, the axes' and the legend's


def test_event_files_over_the_bound_are_a_note_and_not_read(run):
    train = run / "logs" / "train"
    train.mkdir(parents=True)
    with open(train / "events.out.tfevents.1.vm.1.0.v2", "wb") as f:
        f.truncate(report_read.MAX_EVENT_BYTES + 1)  # sparse: no disk, the size is what counts
    epochs, note = report.event_epochs(str(run / "logs"), report.read_event_epochs)
    bound = f"more than {report_read.MAX_EVENT_BYTES >> 20} MiB"
    assert epochs == [] and note is not None and bound in note, note


@pytest.mark.timeout(60)
def test_a_fifo_named_like_an_event_file_is_a_note_not_a_wait(run):
    train = run / "logs" / "train"
    train.mkdir(parents=True)
    os.mkfifo(train / "events.out.tfevents.1.vm.1.0.v2")
    epochs, note = report.event_epochs(str(run / "logs"), report.read_event_epochs)
    assert epochs == [] and note is not None and "not a regular file" in note, note


@pytest.mark.trainer  # (TensorFlow in this process: the event files written as a run writes them)
@pytest.mark.timeout(120)
def test_event_files_with_a_callbacks_histograms_past_8_mib_still_give_the_curves(run):
    """Keras' TensorBoard callback writes the graph and weight histograms beside the epochs (tens
    of MB for a large model): the first bound, 8 MiB, left such a run without curves. Three
    epochs beside 12 MB of other tensors: the three epochs are read, the rest is not kept."""
    tf = pytest.importorskip("tensorflow")
    train = run / "logs" / "train"
    writer = tf.summary.create_file_writer(str(train))
    with writer.as_default():
        for epoch in range(3):
            tf.summary.scalar("epoch_loss", 1.0 / (epoch + 1), step=epoch)
            tf.summary.write("conv1/kernel_0", tf.fill([1_000_000], float(epoch)), step=epoch)  # 4 MB
    writer.close()
    size = sum(f.stat().st_size for f in train.iterdir())
    assert 8 << 20 < size <= report_read.MAX_EVENT_BYTES, size
    epochs, note = report.event_epochs(str(run / "logs"), report.read_event_epochs)
    assert note is None, note
    assert [(e.epoch, e.loss) for e in epochs] == [(1, 1.0), (2, 0.5), (3, pytest.approx(1 / 3))]


@pytest.mark.trainer  # (tensorboard's reader imports TensorFlow in this process)
@pytest.mark.timeout(120)
def test_more_steps_of_an_epoch_tag_than_any_run_has_are_a_note(run):
    """Under the byte bound, 200,000 epochs (10 MB) once held `report` for minutes in 5 GB; the
    reader now keeps only the epoch tags and stops past MAX_POINTS steps of one: a note."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    train = run / "logs" / "train"
    writer = EventFileWriter(str(train))
    for step in range(report_read.MAX_POINTS + 5):
        value = summary_pb2.Summary.Value(tag="epoch_loss", simple_value=1.0 / (step + 1))
        writer.add_event(event_pb2.Event(step=step, summary=summary_pb2.Summary(value=[value])))
    writer.close()
    epochs, note = report.event_epochs(str(run / "logs"), report.read_event_epochs)
    assert epochs == [] and note is not None
    assert f"more than {report_read.MAX_POINTS:,} steps of epoch_loss" in note, note
