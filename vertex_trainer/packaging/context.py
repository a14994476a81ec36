"""The build context: which files Docker would receive, their content hash, the reproducible tar.gz.

- `DockerIgnore`: Docker's own .dockerignore rules (moby/patternmatcher), so the hash covers
  exactly what `docker build` would be sent.
- `ContextEntry`, `walk_context`: the files of a directory the rules keep, with normalized modes.
- `hash_entries`: sha256 over (kind, name, normalized mode, size, content digest), sorted by name:
  no mtimes, owners or absolute paths, so two checkouts on two machines give the same hash.
- `write_archive`: sorted entries, mtime 1980-01-01, uid/gid 0, gzip without timestamp or file
  name: the same context gives the same bytes.

Pure standard library; no network, no subprocess.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import stat
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from vertex_trainer.errors import UserError

FIXED_MTIME = 315532800  # 1980-01-01: a fixed, plausible timestamp for every archive entry
_HASH_HEADER = b"vertex-trainer context v1\n"  # changing it changes every tag


# -- .dockerignore, with Docker's semantics ----------------------------------------------------


@dataclass(frozen=True)
class _Pattern:
    text: str
    regex: re.Pattern[str]
    exclusion: bool  # True for "!pattern" (re-include)
    static_prefix: str


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    out, i, n = ["^"], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if i + 1 < n and pattern[i + 1] == "*":
                i += 1
                if i + 1 < n and pattern[i + 1] == "/":
                    i += 1
                    out.append("(?:.*/)?")  # "**/" also matches zero directories
                else:
                    out.append(".*")
            else:
                out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : j]
                negate = body[:1] in ("!", "^")
                body = body[1:] if negate else body
                out.append("[" + ("^" if negate else "") + body.replace("\\", "\\\\") + "]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    out.append("$")
    return re.compile("".join(out), re.DOTALL)


class DockerIgnore:
    """Docker's .dockerignore rules: last matching pattern wins, a pattern that matches a parent
    directory matches everything inside it, `!` re-includes, `**` spans directories."""

    def __init__(self, text: str = ""):
        self.patterns: list[_Pattern] = []
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            exclusion = line.startswith("!")
            if exclusion:
                line = line[1:].strip()
            line = os.path.normpath(line).replace(os.sep, "/").lstrip("/")
            if line in ("", "."):
                continue
            static = re.split(r"[*?\[\\]", line, maxsplit=1)[0]
            self.patterns.append(_Pattern(line, _pattern_regex(line), exclusion, static))
        self.has_exclusions = any(p.exclusion for p in self.patterns)

    def excluded(self, path: str) -> bool:
        """Is this context-relative posix path left out of the build context?"""
        parts = path.split("/")
        parents = ["/".join(parts[:i]) for i in range(1, len(parts))]
        matched = False
        for p in self.patterns:
            if p.exclusion != matched:  # only a pattern that could flip the result is evaluated
                continue
            if p.regex.match(path) or any(p.regex.match(d) for d in parents):
                matched = not p.exclusion
        return matched

    def may_prune(self, directory: str) -> bool:
        """Can the walk skip this directory whole (excluded, and no `!` pattern reaches inside)?"""
        if not self.excluded(directory):
            return False
        prefix = directory + "/"
        for p in self.patterns:
            if p.exclusion and (
                p.static_prefix.startswith(prefix)
                or prefix.startswith(p.static_prefix)
                or p.text == directory
            ):
                return False
        return True


# -- entries and the hash ----------------------------------------------------------------------


@dataclass(frozen=True)
class ContextEntry:
    """One file of a build context. `name` is the posix path inside the context."""

    name: str
    size: int
    digest: str  # sha256 hex of the content
    mode: int  # normalized: 0o755 if executable else 0o644
    data: bytes | None = None  # generated content, or None to read `source`
    source: str | None = None
    link: str | None = None  # symlink target (kept as a link, like Docker does)

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        if self.source is None:
            raise ValueError(f"context entry {self.name} has neither data nor a source")
        return Path(self.source).read_bytes()


def entry_from_bytes(name: str, data: bytes, mode: int = 0o644) -> ContextEntry:
    """A generated file (rendered Dockerfile, requirements, the saved spec)."""
    return ContextEntry(name, len(data), hashlib.sha256(data).hexdigest(), mode, data=data)


def entry_from_file(name: str, path: Path) -> ContextEntry:
    """A file (or symlink, kept as a link) on disk, named `name` inside the context."""
    if "\n" in name or "\r" in name or "\\" in name:
        raise UserError(
            f"build context file name {name!r} contains a newline or backslash",
            hint="rename the file or exclude it in .dockerignore",
        )
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        return ContextEntry(
            name, 0, hashlib.sha256(target.encode()).hexdigest(), 0o777, source=str(path), link=target
        )
    data = path.read_bytes()
    mode = 0o755 if st.st_mode & 0o111 else 0o644
    return ContextEntry(name, len(data), hashlib.sha256(data).hexdigest(), mode, source=str(path))


def hash_entries(entries: Iterable[ContextEntry]) -> str:
    """The content hash: names, normalized modes and content digests, in sorted order. No
    timestamps, owners or absolute paths, so it is the same on every machine."""
    h = hashlib.sha256(_HASH_HEADER)
    for e in sorted(entries, key=lambda e: e.name):
        kind = "l" if e.link is not None else "f"
        h.update(f"{kind}\0{e.name}\0{e.mode:o}\0{e.size}\0{e.digest}\n".encode())
    return "sha256:" + h.hexdigest()


def walk_context(root: Path, ignore: DockerIgnore, *, prefix: str = "") -> list[ContextEntry]:
    """Files under `root` that the .dockerignore rules keep, named `prefix + relative path`."""
    entries: list[ContextEntry] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        keep = []
        for d in sorted(dirnames):
            full = Path(dirpath, d)
            if full.is_symlink():  # a link to a directory is sent as a link, not walked
                filenames.append(d)
            elif not ignore.may_prune(prefix + rel_dir + d):
                keep.append(d)
        dirnames[:] = keep
        for f in sorted(filenames):
            name = prefix + rel_dir + f
            if not ignore.excluded(name):
                entries.append(entry_from_file(name, Path(dirpath, f)))
    return sorted(entries, key=lambda e: e.name)


# -- the archive -------------------------------------------------------------------------------


def write_archive(
    entries: Iterable[ContextEntry], fileobj: BinaryIO, *, root: str = "", extra: Iterable[ContextEntry] = ()
) -> None:
    """Write a reproducible tar.gz: sorted, fixed mtime/owner, normalized modes, gzip without a
    timestamp or file name. `root` prefixes every name (an sdist's top directory)."""
    all_entries = sorted([*entries, *extra], key=lambda e: e.name)
    with gzip.GzipFile(fileobj=fileobj, mode="wb", mtime=0, filename="", compresslevel=6) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            seen_dirs: set[str] = set()
            for e in all_entries:
                name = f"{root}/{e.name}" if root else e.name
                parts = name.split("/")[:-1]
                for i in range(1, len(parts) + 1):
                    d = "/".join(parts[:i])
                    if d not in seen_dirs:
                        seen_dirs.add(d)
                        tar.addfile(_tarinfo(d, tarfile.DIRTYPE, 0o755))
                if e.link is not None:
                    info = _tarinfo(name, tarfile.SYMTYPE, 0o777)
                    info.linkname = e.link
                    tar.addfile(info)
                    continue
                data = e.read()
                if hashlib.sha256(data).hexdigest() != e.digest:
                    raise UserError(
                        f"{e.name} changed while the context was being packaged", hint="run the command again"
                    )
                info = _tarinfo(name, tarfile.REGTYPE, e.mode)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def _tarinfo(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = kind, mode, FIXED_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info
