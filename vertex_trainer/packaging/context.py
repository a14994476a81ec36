"""The build context: which files Docker would receive, their content hash, the reproducible tar.gz.

- `DockerIgnore`: Docker's own .dockerignore rules (moby/patternmatcher), so the hash covers
  exactly what `docker build` would be sent.
- `ContextEntry`, `walk_context`: the files of a directory the rules keep, with normalized modes;
  with a `screen.Screen`, nothing that looks like a secret (packaging/screen.py), and within
  `LIMITS`: a file's size is checked before it is opened, and files are hashed in chunks, so a
  huge file is refused (exit 2) without being read and nothing is ever read whole.
- `hash_entries`: sha256 over (kind, name, normalized mode, size, content digest), sorted by name:
  no mtimes, owners or absolute paths, so two checkouts on two machines give the same hash.
- `write_archive`: sorted entries, mtime 1980-01-01, uid/gid 0, gzip without timestamp or file
  name: the same context gives the same bytes.

Bounds (`LIMITS`, docs/packager.md "Bounds"): the context (or sdist) is assembled in memory and
uploaded as one object, once per content hash, and a code folder is code: data, checkpoints and
outputs belong on Cloud Storage, where the job reads them (gs:// or /gcs/). No Google limit binds
first (a Cloud Storage object may be 5 TiB; a build may ask for a disk of up to 1000 GB), so the
bounds are this tool's: a file over 512 MiB, a folder over 1 GiB or 100,000 files holds more than
code, and is refused with the .gcloudignore line that leaves it out.

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
from typing import Any, BinaryIO, Protocol

from vertex_trainer.errors import SpecError, UserError
from vertex_trainer.sizes import human_size

FIXED_MTIME = 315532800  # 1980-01-01: a fixed, plausible timestamp for every archive entry
_HASH_HEADER = b"vertex-trainer context v1\n"  # changing it changes every tag
CHUNK = 1024 * 1024  # files are hashed and archived in chunks of this size, never read whole
HEAD_BYTES = 16 * 1024  # what the content rules see of each file (packaging/screen.py): a key fits in 4 KiB


@dataclass(frozen=True)
class Limits:
    """What one packaged folder may hold (the module's docstring, Bounds)."""

    file_bytes: int = 512 * 1024**2
    total_bytes: int = 1024**3
    files: int = 100_000


LIMITS = Limits()


class Screen(Protocol):
    """The rules a folder of yours passes before Docker's (packaging/screen.py `Screen`); each
    method returns why a path is left out, or None to keep it."""

    field: str  # the folder's spec field, named in a refusal

    def directory(self, rel: str, path: Path) -> str | None: ...

    def file(self, rel: str) -> str | None: ...

    def content(self, rel: str, head: bytes) -> str | None: ...

    def left_out(self, rel: str, reason: str) -> None: ...


# -- .dockerignore, with Docker's semantics ----------------------------------------------------


@dataclass(frozen=True)
class _Pattern:
    text: str
    regex: re.Pattern[str]
    exclusion: bool  # True for "!pattern" (re-include)
    static_prefix: str

    def reaches_into(self, directory: str) -> bool:
        """Could this pattern name something inside `directory` (so a walk must enter it)?"""
        prefix = directory + "/"
        return (
            self.static_prefix.startswith(prefix)
            or prefix.startswith(self.static_prefix)
            or self.text == directory
        )


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
        return self.deciding(path) is not None

    def deciding(self, path: str) -> str | None:
        """The pattern that leaves this path out (the last one that matched), or None."""
        parts = path.split("/")
        parents = ["/".join(parts[:i]) for i in range(1, len(parts))]
        matched: _Pattern | None = None
        for p in self.patterns:
            if p.exclusion != (matched is not None):  # only a pattern that could flip the result
                continue
            if p.regex.match(path) or any(p.regex.match(d) for d in parents):
                matched = None if p.exclusion else p
        return matched.text if matched is not None else None

    def may_prune(self, directory: str) -> bool:
        """Can the walk skip this directory whole (excluded, and no `!` pattern reaches inside)?"""
        if not self.excluded(directory):
            return False
        return not any(p.exclusion and p.reaches_into(directory) for p in self.patterns)


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
    """A file (or symlink, kept as a link) on disk, named `name` inside the context, hashed in
    chunks (never read whole)."""
    entry = _read_entry(name, path)
    assert entry is not None  # only a screen leaves a file out
    return entry


def _read_entry(
    name: str, path: Path, screen: Screen | None = None, rel: str = "", st: os.stat_result | None = None
) -> ContextEntry | None:
    """The entry of a file, or None when `screen` leaves it out by its first bytes; `st`: its
    lstat, when the caller has it."""
    if "\n" in name or "\r" in name or "\\" in name:
        raise UserError(
            f"build context file name {name!r} contains a newline or backslash",
            hint="rename the file or exclude it in .dockerignore",
        )
    st = st if st is not None else path.lstat()
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        return ContextEntry(
            name, 0, hashlib.sha256(target.encode()).hexdigest(), 0o777, source=str(path), link=target
        )
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        chunk = f.read(CHUNK)
        if screen is not None and screen.content(rel, chunk[:HEAD_BYTES]):
            return None
        while chunk:
            digest.update(chunk)
            size += len(chunk)
            chunk = f.read(CHUNK)
    mode = 0o755 if st.st_mode & 0o111 else 0o644
    return ContextEntry(name, size, digest.hexdigest(), mode, source=str(path))


def hash_entries(entries: Iterable[ContextEntry]) -> str:
    """The content hash: names, normalized modes and content digests, in sorted order. No
    timestamps, owners or absolute paths, so it is the same on every machine."""
    h = hashlib.sha256(_HASH_HEADER)
    for e in sorted(entries, key=lambda e: e.name):
        kind = "l" if e.link is not None else "f"
        h.update(f"{kind}\0{e.name}\0{e.mode:o}\0{e.size}\0{e.digest}\n".encode())
    return "sha256:" + h.hexdigest()


def walk_context(
    root: Path,
    ignore: DockerIgnore,
    *,
    prefix: str = "",
    screen: Screen | None = None,
    limits: Limits = LIMITS,
) -> list[ContextEntry]:
    """Files under `root` that the rules keep, named `prefix + relative path`.

    Args:
        root: the folder.
        ignore: Docker's rules, matched against the prefixed names.
        prefix: the folder's place in the context.
        screen: the rules before Docker's (packaging/screen.py: built-in, credentials by name and
            content, .gcloudignore); it records what it and `ignore` left out, and names the
            folder's spec field in a refusal.
        limits: the bounds; a file's size is checked before it is opened.
    Returns:
        The entries, sorted by name.
    Raises:
        UserError: a bound is passed (exit 2; SpecError naming the field with a screen).
    """
    entries: list[ContextEntry] = []
    total = 0
    sizes: list[tuple[int, str]] = []  # the largest files so far, for the message
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        keep = []
        for d in sorted(dirnames):
            full = Path(dirpath, d)
            if full.is_symlink():  # a link to a directory is sent as a link, not walked
                filenames.append(d)
            elif screen is not None and screen.directory(rel_dir + d, full):
                continue
            elif not ignore.may_prune(prefix + rel_dir + d):
                keep.append(d)
            elif screen is not None:
                screen.left_out(rel_dir + d + "/", f".dockerignore: {ignore.deciding(prefix + rel_dir + d)}")
        dirnames[:] = keep
        for f in sorted(filenames):
            rel, name = rel_dir + f, prefix + rel_dir + f
            if screen is not None and screen.file(rel):
                continue
            docker = ignore.deciding(name)
            if docker is not None:
                if screen is not None:
                    screen.left_out(rel, f".dockerignore: {docker}")
                continue
            path = Path(dirpath, f)
            st = path.lstat()
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                # a FIFO, socket or device: opening it could block or never end
                if screen is not None:
                    screen.left_out(rel, "not a regular file (a FIFO, socket or device)")
                continue
            _check_bounds(root, rel, st.st_size, total, len(entries), sizes, screen, limits)
            entry = _read_entry(name, path, screen, rel, st)
            if entry is not None:
                entries.append(entry)
                total += entry.size
                sizes = sorted([*sizes, (entry.size, rel)], reverse=True)[:3]
    return sorted(entries, key=lambda e: e.name)


def _check_bounds(
    root: Path,
    rel: str,
    size: int,
    total: int,
    count: int,
    largest: list[tuple[int, str]],
    screen: Screen | None,
    limits: Limits,
) -> None:
    """Refuse (exit 2) a file, or a folder, over the limits, before the file is opened."""
    field = screen.field if screen is not None else "the packaged folder"
    ignore = f"{root}/.gcloudignore"
    if size > limits.file_bytes:
        raise _refuse(
            field,
            root,
            f"holds {rel} of {human_size(size)}, over the {human_size(limits.file_bytes)} one "
            "packaged file may be (docs/packager.md, Bounds)",
            f"keep data and weights on Cloud Storage (the job reads gs:// or /gcs/ paths) and leave "
            f"the file out: add the line '{rel}' to {ignore}",
        )
    if total + size > limits.total_bytes or count + 1 > limits.files:
        top = sorted([*largest, (size, rel)], reverse=True)[:3]
        biggest = ", ".join(f"{r} ({human_size(n)})" for n, r in top)
        over = (
            f"more than {human_size(limits.total_bytes)} of files to package"
            if total + size > limits.total_bytes
            else f"more than {limits.files} files to package"
        )
        raise _refuse(
            field,
            root,
            f"holds {over} (docs/packager.md, Bounds); the largest so far: {biggest}",
            f"leave data, checkpoints and outputs out with lines in {ignore} (e.g. 'data/'); "
            "keep them on Cloud Storage, where the job reads them",
        )


def _refuse(field: str, root: Path, what: str, hint: str) -> UserError:
    if field.startswith("image."):
        return SpecError(field, what, value=str(root), hint=hint)
    return UserError(f"{field} ({root}) {what}", hint=hint)


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
                info = _tarinfo(name, tarfile.REGTYPE, e.mode)
                info.size = e.size
                with _open_entry(e) as reader:
                    try:
                        tar.addfile(info, reader)
                    except OSError:  # it ended before its hashed size: the check below says so
                        pass
                    changed = reader.digest() != e.digest
                if changed:
                    raise UserError(
                        f"{e.name} changed while the context was being packaged", hint="run the command again"
                    )


class _HashingReader(io.RawIOBase):
    """Reads a file (or bytes) for tarfile, hashing what it hands out."""

    def __init__(self, f: BinaryIO):
        self._f, self._h = f, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self._f.read(size if size is not None and size >= 0 else CHUNK)
        self._h.update(data)
        return data

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def digest(self) -> str:
        return self._h.hexdigest()

    def close(self) -> None:
        self._f.close()
        super().close()


def _open_entry(e: ContextEntry) -> _HashingReader:
    if e.data is not None:
        return _HashingReader(io.BytesIO(e.data))
    if e.source is None:
        raise ValueError(f"context entry {e.name} has neither data nor a source")
    return _HashingReader(open(e.source, "rb"))  # closed by the caller's with block


def _tarinfo(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = kind, mode, FIXED_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info
