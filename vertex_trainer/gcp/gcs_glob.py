"""A `gs://` data pattern matched over a Cloud Storage listing as the bundled trainer matches it.

The trainer expands each pattern with `tf.io.gfile.glob`; on `gs://` that is TensorFlow's
GcsFileSystem::GetMatchingPaths (tensorflow/tsl/platform/cloud/gcs_file_system.cc): it lists the
objects below the pattern's fixed prefix (the text before the first of `*?[\\`), adds every folder
their names imply (`a/b/c` -> `a`, `a/b`), and keeps each path that POSIX `fnmatch(pattern, path,
FNM_PATHNAME)` accepts. So `*` and `?` never match `/` (`train-*` does not reach into
`train-a/x`), `[...]` is a set (`[!...]` or `[^...]` its complement) that never matches `/`
either, a backslash makes the next character literal, `*` matches names that start with a dot,
and `**` is two `*`s, not a recursive wildcard. The trainer then drops the folders among the
matches (`tf.io.gfile.isdir`): a pattern that matches only folders gives it no file.

`first_match` reads the listing through the shared ApiClient (its retries), by the fixed prefix,
a bounded number of objects, and stops at the first object that matches: a check, not a listing
of a data set. A pattern this module does not read exactly as TensorFlow does (a `[:class:]` or a
`/` inside brackets, an escaped `/`, a wildcard in the bucket name) is not checked (`GlobMatch.unchecked`).
`tests/submit/test_submit_data_check.py` holds the matcher to the C library's own fnmatch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vertex_trainer.gcp.http import ApiClient

__all__ = ["MAX_LISTED", "GlobMatch", "as_gs", "first_match", "fixed_prefix", "glob_regex"]

MAX_LISTED = 10_000  # objects read for one pattern at most (ten pages of Cloud Storage's 1,000)
_WILDCARDS = "*?[\\"
_PAGE = 1000  # Cloud Storage's largest page


@dataclass(frozen=True)
class GlobMatch:
    """What the listing found for one pattern.

    Attributes:
        uri: the pattern in its gs:// form.
        found: the first object that matched (gs://...), or None.
        folder: when no object matched, a folder the objects' names imply that did (gs://...).
        listed: objects read.
        capped: the listing stopped at the bound with more objects below the prefix.
        unchecked: why the pattern was not checked (a syntax read differently here), else None.
    """

    uri: str
    found: str | None = None
    folder: str | None = None
    listed: int = 0
    capped: bool = False
    unchecked: str | None = None


def as_gs(path: str) -> str:
    """A /gcs/BUCKET/PATH (Cloud Storage FUSE) path as gs://BUCKET/PATH; gs:// as it is."""
    return "gs://" + path[len("/gcs/") :] if path.startswith("/gcs/") else path


def fixed_prefix(name: str) -> str:
    """The part of an object-name pattern before its first wildcard (`*`, `?`, `[` or `\\`)."""
    cut = [i for i in (name.find(c) for c in _WILDCARDS) if i >= 0]
    return name[: min(cut)] if cut else name


def glob_regex(name: str) -> re.Pattern[str] | None:
    """The regular expression of an object-name pattern under fnmatch(FNM_PATHNAME), or None
    when the pattern holds what this translation does not read exactly as the C library does:
    a character class (`[:digit:]`), a `/` inside brackets, an escaped `/`, a `[` that
    never closes."""
    out, i, n = [], 0, len(name)
    while i < n:
        c = name[i]
        if c == "\\":
            if i + 1 == n:  # a trailing backslash: fnmatch matches nothing
                return re.compile(r"(?!)")
            if name[i + 1] == "/":  # glibc's `*` does not meet an escaped / as a separator
                return None
            out.append(re.escape(name[i + 1]))
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            parsed = _bracket(name, i + 1)
            if parsed is None:  # (an unclosed [ too: glibc reads what follows it its own way)
                return None
            text, i = parsed
            out.append(text)
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def _bracket(name: str, i: int) -> tuple[str, int] | None:
    """The set that starts after the `[` at i-1: (its regex, the index after its `]`), or None
    for what glob_regex does not translate (no closing `]`, a class, a `/`)."""
    n = len(name)
    negate = i < n and name[i] in "!^"
    if negate:
        i += 1
    members: list[str] = []
    first = True
    while i < n and (name[i] != "]" or first):
        first = False
        if name[i] == "/" or name.startswith(("[:", "[=", "[."), i):
            return None
        if name[i] == "\\":
            i += 1
            if i == n:
                return None
        low = name[i]
        i += 1
        if low == "/":
            return None
        if i + 1 < n and name[i] == "-" and name[i + 1] != "]":
            i += 1
            if name[i] == "\\":
                i += 1
                if i == n:
                    return None
            high = name[i]
            i += 1
            if high == "/" or low <= "/" <= high:
                return None
            if low <= high:  # a reversed range holds nothing
                members.append(f"{re.escape(low)}-{re.escape(high)}")
            continue
        members.append(re.escape(low))
    if i >= n:
        return None
    if negate:
        return f"[^/{''.join(members)}]", i + 1
    return (f"[{''.join(members)}]" if members else "(?!)"), i + 1


def first_match(api: ApiClient, pattern: str, *, cap: int = MAX_LISTED) -> GlobMatch:
    """The first object a gs:// or /gcs/ pattern matches, from a listing by its fixed prefix.

    Args:
        api: a Cloud Storage JSON API client (gcp.storage.storage_api).
        pattern: gs://BUCKET/NAME-PATTERN or /gcs/BUCKET/NAME-PATTERN.
        cap: the most objects to read.

    Returns:
        a GlobMatch: the object found, else a folder that matched, how many objects were read and
        whether the bound stopped the listing.

    Raises:
        ServiceError: the listing failed after the client's retries (a 403: Denied, naming the
            permission when the service does)."""
    uri = as_gs(pattern)
    bucket, _, name = uri[len("gs://") :].partition("/")
    if not bucket or any(c in bucket for c in _WILDCARDS):
        return GlobMatch(uri, unchecked="a wildcard in the bucket name")
    regex = glob_regex(name)
    if regex is None:
        return GlobMatch(uri, unchecked="a character class, a / inside [...] or an escaped /")
    prefix = fixed_prefix(name)
    # TensorFlow lists the folder of the prefix; the names that can match all start with the prefix.
    base = prefix.rsplit("/", 1)[0] + "/" if "/" in prefix else ""
    listed, folder = 0, None
    # maxResults is Cloud Storage's page size (pageSize, which the pager sends too, it ignores).
    params = {"prefix": prefix, "fields": "items(name),nextPageToken", "maxResults": _PAGE}
    pages = api.pages(
        "list objects", "GET", f"storage/v1/b/{bucket}/o", items="items", params=params, max_pages=None
    )
    for n, page in enumerate(pages, 1):
        if n > cap // _PAGE + 2:  # pages that hold nothing (deleted objects) count too
            return GlobMatch(uri, folder=folder, listed=listed, capped=True)
        for item in page:
            if listed >= cap:
                return GlobMatch(uri, folder=folder, listed=listed, capped=True)
            listed += 1
            object_name = str(item.get("name", ""))
            if not object_name.endswith("/") and regex.fullmatch(object_name):
                return GlobMatch(uri, found=f"gs://{bucket}/{object_name}", listed=listed)
            if folder is None:
                folder = _matching_folder(object_name, base, regex, bucket)
    return GlobMatch(uri, folder=folder, listed=listed)


def _matching_folder(object_name: str, base: str, regex: re.Pattern[str], bucket: str) -> str | None:
    """A folder below `base` that the object's name implies and the pattern matches (gs://...)."""
    parts = object_name[len(base) :].split("/")[:-1]
    for k in range(1, len(parts) + 1):
        path = base + "/".join(parts[:k])
        if regex.fullmatch(path):
            return f"gs://{bucket}/{path}"
    return None
