"""Process checks the runner and sandbox tests share: read from /proc (psutil is not installed)."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True if `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


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
