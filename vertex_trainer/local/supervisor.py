"""The replica processes: start, watch, stop. Nothing here knows how output is shown.

* Each replica starts in a new session (its own process group) with
  prctl(PR_SET_PDEATHSIG, SIGKILL), so it dies with the runner even if the runner is SIGKILLed.
* A reader thread per replica feeds its lines (stdout and stderr merged) into one queue and keeps
  the last `LOG_TAIL`; a waiter thread records the exact exit time and wakes the queue's reader.
* `stop()`: SIGTERM to every process group (all of them first, then the wait), SIGKILL after a
  grace period (STOP_GRACE_S; after Ctrl-C, INTERRUPT_GRACE_S), and it does not return until
  every group is empty (grandchildren included).
* A sampler thread reads each replica's CPU time every `SAMPLE_S` (utime + stime of every
  process of its group, from /proc/<pid>/stat) into `Process.cpu`: (wall time, the share of this
  machine's vCPUs it used since the last sample). The sandbox serves them as the job's CPU
  utilization (docs/sandbox.md); Linux only (elsewhere the list stays empty).
* `InterruptGuard`: Ctrl-C, SIGTERM and SIGHUP raise `Interrupted` in the main thread, once; after
  `disarm()` further signals are swallowed so the clean-up runs to its end.
"""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from vertex_trainer.errors import UserError
from vertex_trainer.local.cluster import Replica
from vertex_trainer.local.failure import Tail

LOG_TAIL = 40  # lines kept per replica for the failure report
STOP_GRACE_S = 5.0  # SIGTERM -> SIGKILL
INTERRUPT_GRACE_S = 0.5  # after Ctrl-C: the run exits within a second or two, whatever the trainer does
SAMPLE_S = 1.0  # the CPU sampler's period (one /proc scan for every replica: ~7 ms at 100 processes)
_PR_SET_PDEATHSIG = 1


@dataclass(eq=False)
class Process:
    """A started replica: its process, its last lines, and when it ended."""

    replica: Replica
    proc: subprocess.Popen[Any]
    tail: Tail = field(default_factory=lambda: Tail(LOG_TAIL))
    reader: threading.Thread | None = None
    ended: float | None = None  # time.monotonic() at exit, set by the waiter thread
    # (time.time(), share of this machine's vCPUs busy since the previous sample): the sampler's
    cpu: list[tuple[float, float]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.replica.name

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode if self.ended is not None else None

    @property
    def failed(self) -> bool:
        return self.ended is not None and self.proc.returncode != 0


class Supervisor:
    """Runs a list of replicas as process groups and reports their lines and exits."""

    def __init__(self, replicas: list[Replica], *, cwd: str | None = None):
        self.replicas = replicas
        self.cwd = cwd
        self.processes: list[Process] = []
        # (replica name, line) for a log line, (replica name, None) for "it ended / closed output".
        self._events: queue.Queue[tuple[str, str | None]] = queue.Queue()
        self._sampling = threading.Event()  # set: the sampler stops

    # -- starting ---------------------------------------------------------------------------
    def start(self) -> None:
        """Start every replica. UserError when a command cannot be started (the ones already
        started keep running until `stop()`)."""
        for rep in self.replicas:
            self.processes.append(self._start(rep))
        threading.Thread(target=self._sample, name="cpu-sampler", daemon=True).start()

    def _sample(self) -> None:
        """Every SAMPLE_S until every replica ended (or stop()): each running replica's CPU share
        (one /proc scan a sample for all of them)."""
        vcpus = os.cpu_count() or 1
        then, before = time.time(), groups_cpu_seconds([p.proc.pid for p in self.processes])
        while not self._sampling.wait(SAMPLE_S) and not self.all_ended():
            now, used = time.time(), groups_cpu_seconds([p.proc.pid for p in self.processes])
            for p in self.processes:
                pid = p.proc.pid
                spent = used.get(pid, -1.0) - before.get(pid, float("inf"))
                # (negative: /proc unreadable, or a process of the group gone with its time: no figure)
                if p.ended is None and spent >= 0 and now > then:
                    p.cpu.append((now, spent / ((now - then) * vcpus)))
            then, before = now, used

    def _start(self, rep: Replica) -> Process:
        try:
            proc = subprocess.Popen(
                list(rep.argv),
                env=dict(rep.env),
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent(os.getpid()),
            )
        except OSError as e:
            raise UserError(
                f"{rep.name}: cannot start {rep.argv[0]!r}: {e.strerror or e}",
                hint="containerSpec.command runs from the local environment",
            ) from None
        p = Process(rep, proc)
        stdout = proc.stdout
        assert stdout is not None  # stdout=PIPE

        def pump() -> None:
            for raw in iter(stdout.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                p.tail.append(line)
                self._events.put((p.name, line))
            stdout.close()
            self._events.put((p.name, None))

        def wait() -> None:
            proc.wait()
            p.ended = time.monotonic()
            self._events.put((p.name, None))  # wakes the main loop at once

        p.reader = threading.Thread(target=pump, name=f"log-{p.name}", daemon=True)
        p.reader.start()
        threading.Thread(target=wait, name=f"wait-{p.name}", daemon=True).start()
        return p

    # -- watching ---------------------------------------------------------------------------
    def lines(self, timeout: float) -> list[tuple[str, str]]:
        """Every queued (replica name, line); waits up to `timeout` for the first event."""
        out: list[tuple[str, str]] = []
        try:
            item = self._events.get(timeout=timeout) if timeout > 0 else self._events.get_nowait()
            while True:
                name, line = item
                if line is not None:
                    out.append((name, line))
                item = self._events.get_nowait()
        except queue.Empty:
            return out

    def failures(self) -> list[Process]:
        """The replicas that have exited non-zero, first to end first."""
        return sorted((p for p in self.processes if p.failed), key=lambda p: p.ended or 0.0)  # failed: ended

    def all_ended(self) -> bool:
        return all(p.ended is not None for p in self.processes)

    # -- stopping ---------------------------------------------------------------------------
    def stop(self, grace_s: float | None = STOP_GRACE_S) -> None:
        """SIGTERM every process group, SIGKILL what is left after `grace_s` (None: STOP_GRACE_S),
        reap all, and wait until each group is empty. Then let the readers deliver the last lines.

        Args:
            grace_s: seconds between SIGTERM and SIGKILL."""
        self._sampling.set()
        stop_all([p.proc for p in self.processes], STOP_GRACE_S if grace_s is None else grace_s)
        for p in self.processes:
            if p.reader is not None:
                p.reader.join(timeout=5)


def stop_all(procs: list[subprocess.Popen[Any]], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM each process's group, SIGKILL what is left after `grace_s`, reap all."""
    for proc in procs:
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for proc in procs:
        # The leader may be gone while children it started still hold the group.
        if proc.poll() is None or _group_alive(proc.pid):
            _signal_group(proc, signal.SIGKILL)
        proc.wait()
        # Members that are not our children cannot be waited for; SIGKILL takes them promptly.
        end = time.monotonic() + 5
        while _group_alive(proc.pid) and time.monotonic() < end:
            time.sleep(0.02)


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def groups_cpu_seconds(pgids: list[int]) -> dict[int, float]:
    """The CPU seconds (user + system, with the children they reaped) of every process in each
    group of `pgids`, from one scan of /proc; {} where /proc cannot be read (not Linux)."""
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return {}
    ticks = dict.fromkeys(pgids, 0)
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                # the fields after "(comm)": state ppid pgrp ... utime(11) stime cutime cstime(14)
                rest = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        group = int(rest[2])
        if group in ticks:
            ticks[group] += int(rest[11]) + int(rest[12]) + int(rest[13]) + int(rest[14])
    return {group: n / _CLOCK_TICKS for group, n in ticks.items()}


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _signal_group(proc: subprocess.Popen[Any], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # start_new_session: pgid == pid
    except ProcessLookupError:
        pass


def die_with_parent(parent_pid: int) -> Callable[[], None]:
    """preexec_fn: die with the parent, even if it is SIGKILLed (Linux prctl); a child that finds
    its parent gone already exits at once."""
    libc = None
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            libc = None

    def setup() -> None:
        if libc is not None:
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl: then nobody would signal us.
        if os.getppid() != parent_pid:
            os._exit(1)

    return setup


class Interrupted(Exception):
    """Raised in the main thread by SIGINT/SIGTERM/SIGHUP while replicas run."""


class InterruptGuard:
    """Within `with`: the first SIGINT/SIGTERM/SIGHUP raises `Interrupted`; after `disarm()` they
    are swallowed (a second Ctrl-C cannot break the clean-up; PDEATHSIG covers a hard kill). The
    previous handlers come back on exit. Off the main thread it does nothing."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self._fired = False
        self._previous: dict[int, Callable[[int, FrameType | None], Any] | int | None] = {}

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        if not self._fired:
            self._fired = True
            raise Interrupted(signal.Signals(signum).name)

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                try:
                    self._previous[sig] = signal.signal(sig, self._handler)
                except (ValueError, OSError):
                    pass
        return self

    def disarm(self) -> None:
        self._fired = True

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            try:
                signal.signal(sig, handler)
            except (ValueError, OSError):
                pass
