"""Process checks the runner and sandbox tests share: read from /proc (psutil is not installed)."""

from __future__ import annotations

import os
import select
import socket
import time
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """True if `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def wait_gone(pids, timeout: float) -> list[int]:
    """Wait (on pidfds: woken by each exit, no polling) until every pid has exited or `timeout`
    has passed; the pids still alive."""
    deadline = time.monotonic() + timeout
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        finally:
            os.close(fd)
    return [p for p in pids if pid_alive(p)]


def processes_with_env(marker: str) -> list[int]:
    """PIDs (not this one) whose environment holds `marker` (a per-test token)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker.encode() in f.read() and pid_alive(int(entry)):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def tcp_listeners(table_dir: str = "/proc/self/net") -> list[tuple[str, int, str]]:
    """(address, port, socket inode) of every TCP socket listening in the network namespace that
    `table_dir` belongs to (its tcp and tcp6 tables; /proc/PID/net for a process's)."""
    found = []
    for name in ("tcp", "tcp6"):
        try:
            rows = Path(table_dir, name).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            cols = row.split()
            if cols[3] == "0A":  # LISTEN
                address, port = cols[1].rsplit(":", 1)
                found.append((_address(address), int(port, 16), cols[9]))
    return found


def _address(hex_address: str) -> str:
    """/proc/net/tcp's 0100007F -> '127.0.0.1' (tcp6's 32 hex digits too)."""
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)
