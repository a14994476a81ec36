"""Write a rendered directory without ever deleting or overwriting what the render did not write
(issue 41: `trigger render -o DIR` once removed DIR/trainer/ and main.py from any folder that held
a file named trigger.json).

A render writes into a directory that does not exist or is empty, or into one that holds a
previous render, recognised by its manifest (MANIFEST: every file the render wrote with its
SHA-256, and a digest of that list, so a foreign or damaged file of the same name is not taken
for one). Then it replaces only the files the manifest lists, and only while they hold what the
render wrote (a file changed since is the user's: exit 2, nothing touched); a file it no longer
writes is removed only when unchanged. Every check is made before the first write, and no path
through a symbolic link is written or removed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from vertex_trainer.errors import UserError
from vertex_trainer.gcp.names import shown

MANIFEST = ".vertex-trainer-render.json"
TOOL = "vertex-trainer trigger render"
Files = dict[str, bytes]  # relative POSIX path -> content


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _digest(files: Mapping[str, str]) -> str:
    return _sha(json.dumps(dict(sorted(files.items())), sort_keys=True).encode())


def manifest_text(files: Mapping[str, str]) -> str:
    body = {"tool": TOOL, "format": 1, "files": dict(sorted(files.items())), "digest": _digest(files)}
    return json.dumps(body, indent=1, sort_keys=True) + "\n"


def _refuse(out_dir: Path, why: str) -> UserError:
    return UserError(
        f"-o {shown(str(out_dir))}: {why}; nothing was written or removed",
        hint="give -o a new or empty directory (or one a previous `trigger render` wrote)",
    )


def previous(out_dir: Path) -> dict[str, str]:
    """What a previous render wrote into `out_dir` ({} for a missing or empty directory);
    UserError (exit 2) for a directory that holds anything else."""
    if out_dir.is_symlink() and not out_dir.exists():
        raise _refuse(out_dir, "a symbolic link to nothing")
    if not out_dir.exists():
        return {}
    if not out_dir.is_dir():
        raise _refuse(out_dir, "not a directory")
    if not any(out_dir.iterdir()):
        return {}
    path = out_dir / MANIFEST
    if not path.is_file() or path.is_symlink():
        raise _refuse(out_dir, f"not empty, and holds no render's manifest ({MANIFEST})")
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        files = data["files"]
        ok = (
            data.get("tool") == TOOL
            and isinstance(files, dict)
            and all(isinstance(k, str) and isinstance(v, str) and len(v) == 64 for k, v in files.items())
            and data.get("digest") == _digest(files)
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise _refuse(out_dir, f"its {MANIFEST} is not one a render wrote (or was changed)")
    for rel in files:
        _inside(out_dir, rel)
    return dict(files)


def _inside(out_dir: Path, rel: str) -> Path:
    """out_dir/rel, refused when rel leaves out_dir or any part of the path is a symbolic link."""
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise _refuse(out_dir, f"{shown(rel)} is not a path inside it")
    path = out_dir
    for part in parts:
        path = path / part
        if path.is_symlink():
            raise _refuse(out_dir, f"{shown(rel)} goes through a symbolic link")
    return path


def _current(path: Path) -> str | None:
    return _sha(path.read_bytes()) if path.is_file() else None


def write_files(out_dir: Path, files: Files, *, executable: Iterable[str] = ()) -> list[str]:
    """Write `files` into `out_dir` with their manifest; returns what was written (relative)."""
    before = previous(out_dir)
    new = {rel: _sha(data) for rel, data in files.items()}
    now_of: dict[str, str | None] = {}  # each file's digest as found, read once
    stale = []
    for rel in sorted(set(new) | set(before)):
        path = _inside(out_dir, rel)
        now = now_of[rel] = _current(path)
        if path.exists() and now is None:
            raise _refuse(out_dir, f"{shown(rel)} is there and is not a file")
        if path.exists() and rel not in before:
            raise _refuse(out_dir, f"{shown(rel)} is there and a previous render did not write it")
        if rel in new and now is not None and now not in (new[rel], before[rel]):
            raise _refuse(out_dir, f"{shown(rel)} was changed since it was rendered")
        if rel not in new and now is not None and now == before[rel]:
            stale.append(path)  # written by the previous render, no longer: removed
    for rel, data in files.items():
        path = out_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if now_of[rel] != new[rel]:
            path.write_bytes(data)
        if rel in executable:
            path.chmod(0o755)
    for path in stale:
        path.unlink()
        for parent in path.parents:  # the folders it leaves empty, up to out_dir
            if parent == out_dir or any(parent.iterdir()):
                break
            parent.rmdir()
    (out_dir / MANIFEST).write_text(manifest_text(new), encoding="utf-8")
    return [*new, MANIFEST]


__all__ = ["MANIFEST", "Files", "manifest_text", "previous", "write_files"]
